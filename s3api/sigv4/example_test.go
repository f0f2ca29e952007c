package sigv4_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"fencegate/s3api/sigv4"
)

// A front door verifies a request, then streams Result.Body and commits
// only after reading io.EOF.
func ExampleVerifier_Verify() {
	v, _ := sigv4.New(sigv4.Config{Keys: keys{"AKIDEXAMPLE": "secret"}, Region: "us-east-1"})

	// A client signs a PutObject (here with the AWS SDK's signer).
	body := []byte("hello, fenced world")
	r := httptest.NewRequest(http.MethodPut, "http://gateway.example/bucket/key", bytes.NewReader(body))
	r.Header.Set("X-Amz-Content-Sha256", hexSHA256(body))
	r.Header.Set("X-Amz-Meta-Fence-Token", "33")
	v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).
		SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret"}, r, hexSHA256(body), "s3", "us-east-1", time.Now())

	res, err := v.Verify(context.Background(), r)
	var refusal *sigv4.Error
	if errors.As(err, &refusal) {
		fmt.Println("refused:", refusal.Status, refusal.Code)
		return
	}
	got, err := io.ReadAll(res.Body) // an upstream PutObject would read it here
	if err != nil {
		fmt.Println("body refused, nothing stored:", err)
		return
	}
	fmt.Printf("%s wrote %q, signed headers %v\n", res.Identity, got, res.SignedHeaders)
	// Output: identity-AKIDEXAMPLE wrote "hello, fenced world", signed headers [content-length host x-amz-content-sha256 x-amz-date x-amz-meta-fence-token]
}
