package s3api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"

	"fencegate/api"
	"fencegate/gateway"
)

// conditionalCase is one client-conditional write of a key that the door
// first writes with the seeds' bodies, with tokens 5, 6, ... in turn.
type conditionalCase struct {
	name  string
	seeds []string
	// deleted, when not zero, deletes the key after the seeds with this
	// token, which the mark keeps.
	deleted api.Token
	// condition returns the write's If-Match and If-None-Match (nil:
	// none) from the seeds' ETags, in the order they were written.
	condition func(etags []string) (ifMatch, ifNoneMatch *string)
	token     api.Token
	// wantStatus and wantCode are the answer: 200, or an S3 error.
	wantStatus int
	wantCode   string
	// wantBody and wantMark are what S3 and etcd hold afterwards: the
	// write's body and token when it landed, else the last seed's.
	wantBody string
	wantMark api.Token
}

// conditionalCases are the client conditions of PutObject and
// CompleteMultipartUpload, each composed with the fence: the write lands
// only if both hold; a failed condition is 412 PreconditionFailed with
// nothing stored and no mark raised; a stale token is 409 whatever the
// condition says.
func conditionalCases() []conditionalCase {
	none := func([]string) (*string, *string) { return nil, nil }
	ifNoneMatch := func([]string) (*string, *string) { return nil, aws.String("*") }
	ifMatch := func(i int, transform func(string) string) func([]string) (*string, *string) {
		return func(etags []string) (*string, *string) { return aws.String(transform(etags[i])), nil }
	}
	same := func(s string) string { return s }
	bare := func(s string) string { return strings.Trim(s, `"`) }
	weak := func(s string) string { return "W/" + s }
	return []conditionalCase{
		{name: "no condition", seeds: []string{"v5"}, condition: none, token: 6, wantStatus: 200, wantBody: "new", wantMark: 6},
		{name: "If-None-Match * on an absent key", condition: ifNoneMatch, token: 5, wantStatus: 200, wantBody: "new", wantMark: 5},
		{name: "If-None-Match * on a present key", seeds: []string{"v5"}, condition: ifNoneMatch, token: 6,
			wantStatus: 412, wantCode: "PreconditionFailed", wantBody: "v5", wantMark: 5},
		{name: "If-Match the current ETag", seeds: []string{"v5", "v6"}, condition: ifMatch(1, same), token: 7, wantStatus: 200, wantBody: "new", wantMark: 7},
		{name: "If-Match the current ETag unquoted", seeds: []string{"v5", "v6"}, condition: ifMatch(1, bare), token: 7, wantStatus: 200, wantBody: "new", wantMark: 7},
		{name: "If-Match an old ETag", seeds: []string{"v5", "v6"}, condition: ifMatch(0, same), token: 7,
			wantStatus: 412, wantCode: "PreconditionFailed", wantBody: "v6", wantMark: 6},
		{name: "If-Match the current ETag, weak", seeds: []string{"v5"}, condition: ifMatch(0, weak), token: 6,
			wantStatus: 412, wantCode: "PreconditionFailed", wantBody: "v5", wantMark: 5},
		{name: "If-Match * on an absent key", condition: func([]string) (*string, *string) { return aws.String("*"), nil }, token: 5,
			wantStatus: 412, wantCode: "PreconditionFailed"},
		{name: "If-Match an ETag on an absent key", condition: func([]string) (*string, *string) { return aws.String(`"abc"`), nil }, token: 5,
			wantStatus: 412, wantCode: "PreconditionFailed"},
		{name: "stale token, condition holds", seeds: []string{"v5", "v6"}, condition: ifMatch(1, same), token: 5,
			wantStatus: 409, wantCode: "StaleFenceToken", wantBody: "v6", wantMark: 6},
		{name: "stale token, condition fails", seeds: []string{"v5", "v6"}, condition: ifNoneMatch, token: 5,
			wantStatus: 409, wantCode: "StaleFenceToken", wantBody: "v6", wantMark: 6},
		{name: "stale token (a delete's mark), condition fails", seeds: []string{"v5"}, deleted: 7,
			condition: func([]string) (*string, *string) { return aws.String(`"abc"`), nil }, token: 5,
			wantStatus: 409, wantCode: "StaleFenceToken", wantMark: 7},
		{name: "If-None-Match an ETag", seeds: []string{"v5"}, condition: func(etags []string) (*string, *string) { return nil, aws.String(etags[0]) }, token: 6,
			wantStatus: 501, wantCode: "NotImplemented", wantBody: "v5", wantMark: 5},
	}
}

// seedConditional writes tc's seeds to key through the door and returns
// their ETags.
func (d *door) seedConditional(t *testing.T, c *s3.Client, key string, tc conditionalCase) []string {
	t.Helper()
	var etags []string
	for i, body := range tc.seeds {
		out, err := d.put(t, c, key, api.Token(5+i), body)
		if err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		etags = append(etags, aws.ToString(out.ETag))
	}
	if tc.deleted != 0 {
		_, err := d.client(writerKey, withHeader("X-Amz-Meta-Fence-Token", tc.deleted.String())).DeleteObject(context.Background(),
			&s3.DeleteObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("delete %d: %v", tc.deleted, err)
		}
	}
	return etags
}

// checkConditional checks a conditional write's answer err and what S3
// and etcd hold afterwards: the write's body and token when it landed,
// else the last seed's, and the mark wantMark.
func (d *door) checkConditional(t *testing.T, key string, tc conditionalCase, err error, wantMark api.Token) {
	t.Helper()
	if tc.wantStatus == http.StatusOK {
		if err != nil {
			t.Fatalf("write: %v; want 200", err)
		}
	} else {
		wantAPIError(t, err, tc.wantStatus, tc.wantCode)
	}
	body, token, ok := d.stored(t, key)
	wantToken := api.Token(5 + len(tc.seeds) - 1).String()
	if tc.wantStatus == http.StatusOK {
		wantToken = tc.token.String()
	}
	switch {
	case tc.wantBody == "" && ok:
		t.Errorf("S3 holds %q with token %s; want no object", body, token)
	case tc.wantBody != "" && (!ok || body != tc.wantBody || token != wantToken):
		t.Errorf("S3 holds %q with token %q (exists %v); want %q with token %s", body, token, ok, tc.wantBody, wantToken)
	}
	if hwm := d.mark(t, key); hwm != wantMark {
		t.Errorf("mark = %d; want %d", hwm, wantMark)
	}
}

// TestPutObjectClientConditions: PutObject with the client's own
// If-None-Match: * or If-Match, through aws-sdk-go-v2, read back from
// versitygw with minio-go. A refused condition sends no PUT to S3.
func TestPutObjectClientConditions(t *testing.T) {
	d := newDoor(t, doorOptions{})
	c := d.client(writerKey)
	for i, tc := range conditionalCases() {
		t.Run(tc.name, func(t *testing.T) {
			key := "put-" + string(rune('a'+i))
			etags := d.seedConditional(t, c, key, tc)
			ifMatch, ifNoneMatch := tc.condition(etags)
			d.s3.Reset()
			_, err := c.PutObject(context.Background(), &s3.PutObjectInput{
				Bucket: aws.String(d.bucket), Key: aws.String(key), Body: strings.NewReader("new"),
				Metadata: map[string]string{"fence-token": tc.token.String()},
				IfMatch:  ifMatch, IfNoneMatch: ifNoneMatch,
			})
			d.checkConditional(t, key, tc, err, tc.wantMark)
			// A writer may not be allowed to read the object: a 412
			// never tells it the object's ETag (a hash of its bytes).
			if n := len(etags); err != nil && n > 0 && strings.Contains(err.Error(), strings.Trim(etags[n-1], `"`)) {
				t.Errorf("the refusal %q names the object's ETag %s", err, etags[n-1])
			}
			if n := d.s3.CountMethod(http.MethodPut); tc.wantStatus != http.StatusOK && n != 0 {
				t.Errorf("the refused write sent %d PUTs to S3; want 0", n)
			}
		})
	}
}

// TestCompleteMultipartUploadClientConditions: CompleteMultipartUpload
// with the client's own If-None-Match: * or If-Match. A completion
// refused for its condition leaves the upload in place (as S3 does: the
// client may complete it again); one refused as stale is aborted.
func TestCompleteMultipartUploadClientConditions(t *testing.T) {
	d := newDoor(t, doorOptions{})
	c := d.client(writerKey)
	ctx := context.Background()
	for i, tc := range conditionalCases() {
		t.Run(tc.name, func(t *testing.T) {
			key := "mpu-" + string(rune('a'+i))
			// The upload is created (raising the mark to its token)
			// and its part sent after the seeds, but for a stale
			// completion: before them, when its token was not yet
			// stale.
			var (
				id   string
				part types.CompletedPart
			)
			begin := func() {
				id = d.createUpload(t, c, key, tc.token)
				var err error
				if part, err = d.uploadPart(c, key, id, 1, []byte("new")); err != nil {
					t.Fatalf("UploadPart: %v", err)
				}
			}
			if tc.wantCode == "StaleFenceToken" {
				begin()
			}
			etags := d.seedConditional(t, c, key, tc)
			if id == "" {
				begin()
			}
			ifMatch, ifNoneMatch := tc.condition(etags)
			_, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
				Bucket: aws.String(d.bucket), Key: aws.String(key), UploadId: aws.String(id),
				MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{part}},
				IfMatch:         ifMatch, IfNoneMatch: ifNoneMatch,
			})
			// CreateMultipartUpload raised the mark to the upload's
			// token; a completion refused raises nothing more.
			d.checkConditional(t, key, tc, err, max(tc.wantMark, tc.token))
			kept := tc.wantStatus == http.StatusPreconditionFailed || tc.wantStatus == http.StatusNotImplemented
			switch left := d.uploadsOf(t, key); {
			case kept && left != 1:
				t.Errorf("%d uploads of %s left; want the upload kept after a %d", left, key, tc.wantStatus)
			case !kept && left != 0:
				t.Errorf("%d uploads of %s left; want none", left, key)
			}
		})
	}
}

// uploadsOf counts the uploads of key in progress, as versitygw lists
// them.
func (d *door) uploadsOf(tb testing.TB, key string) int {
	tb.Helper()
	n := 0
	for u := range d.minio.ListIncompleteUploads(context.Background(), d.bucket, key, false) {
		if u.Err != nil {
			tb.Fatal(u.Err)
		}
		if u.Key == key {
			n++
		}
	}
	return n
}

// TestPutObjectClientConditionLostRace: a write whose condition held
// when the gateway observed the object loses its conditional PUT to a
// write that lands between its fence check and its PUT. The store's 412
// on the gateway's condition is retried from a fresh observation, on
// which the client's condition fails: 412 PreconditionFailed, and S3
// keeps the other write's bytes.
func TestPutObjectClientConditionLostRace(t *testing.T) {
	var d *door
	hooks := &gateway.TestHooks{AfterFenceCheck: func(ctx context.Context, resource api.Resource, token api.Token) {
		if token != 9 {
			return
		}
		key := resource[strings.LastIndex(string(resource), "/")+1:]
		if _, err := d.minio.PutObject(context.Background(), d.bucket, string(key), strings.NewReader("interloper"), -1, minio.PutObjectOptions{}); err != nil {
			t.Error(err)
		}
	}}
	d = newDoor(t, doorOptions{gateway: gateway.Config{TestHooks: hooks}})
	c := d.client(writerKey)
	seeded, err := d.put(t, c, "match", 5, "v5")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key                  string
		ifMatch, ifNoneMatch *string
	}{
		{key: "create", ifNoneMatch: aws.String("*")},
		{key: "match", ifMatch: seeded.ETag},
	} {
		t.Run(tc.key, func(t *testing.T) {
			_, err := c.PutObject(context.Background(), &s3.PutObjectInput{
				Bucket: aws.String(d.bucket), Key: aws.String(tc.key), Body: strings.NewReader("token 9"),
				Metadata: map[string]string{"fence-token": "9"}, IfMatch: tc.ifMatch, IfNoneMatch: tc.ifNoneMatch,
			})
			wantAPIError(t, err, http.StatusPreconditionFailed, "PreconditionFailed")
			if body, _, _ := d.stored(t, tc.key); body != "interloper" {
				t.Fatalf("S3 holds %q; want the interloper's bytes", body)
			}
		})
	}
}
