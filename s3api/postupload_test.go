package s3api_test

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
)

// TestPostUploadNotImplemented: a browser's form upload (POST to the
// bucket, multipart/form-data, signed by a policy in the form, no
// Authorization header) is answered 501 NotImplemented, as docs/s3-api.md
// says: the door does not serve POST uploads. Nothing reaches the store.
func TestPostUploadNotImplemented(t *testing.T) {
	d := newDoor(t, doorOptions{})
	var form bytes.Buffer
	w := multipart.NewWriter(&form)
	for _, f := range [][2]string{{"key", "posted"}, {"x-amz-meta-fence-token", "5"}, {"policy", "eyJjb25kaXRpb25zIjpbXX0="},
		{"x-amz-algorithm", "AWS4-HMAC-SHA256"}, {"x-amz-credential", writerKey + "/20250101/us-east-1/s3/aws4_request"},
		{"x-amz-date", "20250101T000000Z"}, {"x-amz-signature", strings.Repeat("0", 64)}} {
		if err := w.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	file, err := w.CreateFormFile("file", "posted.txt")
	if err != nil {
		t.Fatal(err)
	}
	file.Write([]byte("posted bytes"))
	w.Close()
	before := d.s3.Count()
	resp, err := d.srv.Client().Post(d.url+"/"+d.bucket, w.FormDataContentType(), &form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(buf.String(), "<Code>NotImplemented</Code>") {
		t.Errorf("POST upload: %d %s; want 501 NotImplemented", resp.StatusCode, buf.String())
	}
	if n := d.s3.Count() - before; n != 0 {
		t.Errorf("the POST upload sent %d requests to the store; want none", n)
	}
}
