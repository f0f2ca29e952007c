package testenv_test

import (
	"fmt"
	"net/http"
	"strings"

	"fencegate/internal/testenv"
)

// StartS3Main needs no testing.TB, so TestMain can start one server for
// all the tests of a package:
//
//	func TestMain(m *testing.M) {
//		s3, stop, err := testenv.StartS3Main()
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		sharedS3 = s3
//		code := m.Run()
//		stop()
//		os.Exit(code)
//	}
//
// The tests then call sharedS3.Minio(t) and sharedS3.CreateBucket(t, name).
func ExampleStartS3Main() {
	s3, stop, err := testenv.StartS3Main()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	resp, err := http.Get(s3.Endpoint() + "/healthz")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(strings.HasPrefix(s3.Endpoint(), "http://127.0.0.1:"), s3.Region, resp.Status)
	// Output: true us-east-1 200 OK
}
