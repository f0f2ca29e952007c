package s3api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestCopyObjectOntoItself: aws-sdk-go-v2's CopyObject of an object onto
// itself that changes nothing (metadata directive COPY) is refused 400
// InvalidRequest with S3's message, and the object and its mark stay as
// they were; with REPLACE it is a fenced write like any other.
func TestCopyObjectOntoItself(t *testing.T) {
	d := newDoor(t, doorOptions{})
	ctx := context.Background()
	c := d.client(writerKey)
	if _, err := d.put(t, c, "self", 5, "self bytes"); err != nil {
		t.Fatal(err)
	}
	copyOnto := func(directive string, token string) error {
		in := &s3.CopyObjectInput{Bucket: aws.String(d.bucket), Key: aws.String("self"), CopySource: aws.String(d.bucket + "/self")}
		if directive == "REPLACE" {
			in.MetadataDirective = types.MetadataDirectiveReplace
			in.Metadata = map[string]string{"fence-token": token, "new": "yes"}
			_, err := c.CopyObject(ctx, in)
			return err
		}
		_, err := c.CopyObject(ctx, in, withHeader("X-Amz-Meta-Fence-Token", token))
		return err
	}
	err := copyOnto("", "6")
	wantAPIError(t, err, http.StatusBadRequest, "InvalidRequest")
	if !strings.Contains(err.Error(), "This copy request is illegal because it is trying to copy an object to itself") {
		t.Errorf("copy onto itself: %v; want S3's message", err)
	}
	if got, token, _ := d.stored(t, "self"); got != "self bytes" || token != "5" || d.mark(t, "self") != 5 {
		t.Fatalf("after the refused copy: %q, token %q, mark %d; want the object and mark 5 as they were", got, token, d.mark(t, "self"))
	}
	if err := copyOnto("REPLACE", "7"); err != nil {
		t.Fatalf("copy onto itself with REPLACE: %v", err)
	}
	if got, token, _ := d.stored(t, "self"); got != "self bytes" || token != "7" || d.mark(t, "self") != 7 {
		t.Fatalf("after the copy with REPLACE: %q, token %q, mark %d; want the same bytes, token and mark 7", got, token, d.mark(t, "self"))
	}
}
