package testenv_test

import (
	"fmt"
	"net/http"
	"strings"

	"fencegate/internal/testenv"
)

// StartS3Main needs no testing.TB, so it can run where there is none.
// For the usual case, one server for all the tests of a package started
// from TestMain, [testenv.RunWithS3] does the rest too:
//
//	var sharedS3 *testenv.S3
//
//	func TestMain(m *testing.M) {
//		os.Exit(testenv.RunWithS3(m, &sharedS3))
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
