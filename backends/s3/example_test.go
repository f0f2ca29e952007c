package s3_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"fencegate/api"
	"fencegate/backends/s3"
)

// The engine asks for a ticket once the write's fence check passed, with
// the version it observed before it; the client sends the bytes to the
// store itself, with exactly the ticket's headers. Used again, the ticket
// is refused: its condition no longer holds.
func ExampleClient_PresignPut() {
	ctx := context.Background()
	store, err := s3.New(ctx, s3.Config{Endpoint: server.Endpoint(), AccessKeyID: server.AccessKey, SecretAccessKey: server.SecretKey, UsePathStyle: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	var exists *api.StoreError // from an earlier run of the example
	if err := store.CreateBucket(ctx, api.CreateBucketInput{Bucket: "example"}); err != nil && !(errors.As(err, &exists) && exists.Code == "BucketAlreadyOwnedByYou") {
		fmt.Println(err)
		return
	}
	key := fmt.Sprintf("report-%d.csv", time.Now().UnixNano()) // a new object each run

	body := "rows from A"
	tk, err := store.PresignPut(ctx, api.TicketRequest{
		Path:        api.ObjectPath{Bucket: "example", Key: key},
		Replaces:    api.ObjectVersion{}, // observed: no object, so If-None-Match: *
		Token:       33,
		Size:        int64(len(body)),
		ContentType: "text/csv",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 2 {
		req, _ := http.NewRequestWithContext(ctx, tk.Method, tk.URL, strings.NewReader(body))
		for name, value := range tk.Headers {
			req.Header.Set(name, value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	// Output:
	// 200
	// 412
}
