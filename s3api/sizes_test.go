package s3api_test

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
)

// TestMetadataTooLarge: user metadata above 2 KiB is S3's 400
// MetadataTooLarge, with S3's message and its Size and MaxSizeAllowed
// members, on every write that sends it: PutObject,
// CreateMultipartUpload, and CopyObject whatever its metadata directive
// (with COPY the copy would store its source's, and S3 refuses the
// request's all the same). Size counts names and values, the token's
// x-amz-meta-fence-token entry included. Nothing lands.
func TestMetadataTooLarge(t *testing.T) {
	d := newDoor(t, doorOptions{})
	if _, err := d.put(t, d.client(writerKey), "src", 3, "source"); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("v", 2040)
	wantSize := len("big") + len(big) + len("fence-token") + len("5")
	tests := []struct {
		name, method, target string
		headers              map[string]string
	}{
		{"PutObject", http.MethodPut, "/dst", nil},
		{"CreateMultipartUpload", http.MethodPost, "/dst?uploads", nil},
		{"CopyObject default directive", http.MethodPut, "/dst", map[string]string{"X-Amz-Copy-Source": d.bucket + "/src"}},
		{"CopyObject COPY", http.MethodPut, "/dst", map[string]string{"X-Amz-Copy-Source": d.bucket + "/src", "X-Amz-Metadata-Directive": "COPY"}},
		{"CopyObject REPLACE", http.MethodPut, "/dst", map[string]string{"X-Amz-Copy-Source": d.bucket + "/src", "X-Amz-Metadata-Directive": "REPLACE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, d.url+"/"+d.bucket+tt.target, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Amz-Meta-Fence-Token", "5")
			req.Header.Set("X-Amz-Meta-Big", big)
			for name, value := range tt.headers {
				req.Header.Set(name, value)
			}
			resp := d.rawRequest(t, writerKey, req, nil)
			e := readS3Error(t, resp)
			if resp.StatusCode != http.StatusBadRequest || e.Code != "MetadataTooLarge" || e.Message != msgMetadataTooLarge {
				t.Errorf("answered %d %s (%s); want 400 MetadataTooLarge (%s)", resp.StatusCode, e.Code, e.Message, msgMetadataTooLarge)
			}
			if e.Size != strconv.Itoa(wantSize) || e.MaxSizeAllowed != "2048" {
				t.Errorf("Size %q, MaxSizeAllowed %q; want %d, 2048", e.Size, e.MaxSizeAllowed, wantSize)
			}
			if _, _, ok := d.stored(t, "dst"); ok {
				t.Errorf("dst landed in the store")
			}
		})
	}
}

// TestRepeatedMetadataHeader: a user metadata header sent more than
// once, in one spelling or several, is stored as S3 stores it (and as
// AWS documents it: "combines headers that have the same name (ignoring
// case) into a comma-delimited list"), its values joined with "," in the
// order sent, as an independent client (minio-go) reads it from the
// store; the fencing token sent twice stays refused, whatever the
// spelling, and nothing lands.
func TestRepeatedMetadataHeader(t *testing.T) {
	d := newDoor(t, doorOptions{})
	tests := []struct {
		name    string
		headers [][2]string // in the order sent
		status  int
		code    string
		want    map[string]string // minio-go's UserMetadata, on success
	}{
		{"one spelling", [][2]string{{"x-amz-meta-key", "value-1"}, {"x-amz-meta-key", "value-2"}, {"x-amz-meta-fence-token", "5"}},
			http.StatusOK, "", map[string]string{"Key": "value-1,value-2"}},
		{"spellings that differ in case", [][2]string{{"x-amz-meta-xyzz", "xxx-3"}, {"x-amz-meta-Xyzz", "xxx-1"}, {"X-AMZ-META-XYZZ", "xxx-2"},
			{"x-amz-meta-foo", "bar"}, {"x-amz-meta-fence-token", "6"}},
			http.StatusOK, "", map[string]string{"Xyzz": "xxx-3,xxx-1,xxx-2", "Foo": "bar"}},
		{"the token twice", [][2]string{{"x-amz-meta-fence-token", "7"}, {"x-amz-meta-fence-token", "7"}},
			http.StatusBadRequest, "InvalidFenceToken", nil},
		{"the token twice in two spellings", [][2]string{{"x-amz-meta-fence-token", "7"}, {"X-Amz-Meta-FENCE-token", "8"}},
			http.StatusBadRequest, "InvalidFenceToken", nil},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "k" + strconv.Itoa(i)
			req, err := http.NewRequest(http.MethodPut, d.url+"/"+d.bucket+"/"+key, bytes.NewReader([]byte("body")))
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range tt.headers {
				req.Header.Add(h[0], h[1])
			}
			resp := d.rawRequest(t, writerKey, req, []byte("body"))
			if tt.status != http.StatusOK {
				e := readS3Error(t, resp)
				if resp.StatusCode != tt.status || e.Code != tt.code {
					t.Fatalf("answered %d %s (%s); want %d %s", resp.StatusCode, e.Code, e.Message, tt.status, tt.code)
				}
				if _, _, ok := d.stored(t, key); ok {
					t.Errorf("%s landed in the store", key)
				}
				return
			}
			if resp.StatusCode != http.StatusOK {
				e := readS3Error(t, resp)
				t.Fatalf("answered %d %s (%s); want 200", resp.StatusCode, e.Code, e.Message)
			}
			info, err := d.minio.StatObject(context.Background(), d.bucket, key, minio.StatObjectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tt.want {
				if got := info.UserMetadata[name]; got != want {
					t.Errorf("stored x-amz-meta-%s = %q; want %q (all: %v)", name, got, want, info.UserMetadata)
				}
			}
		})
	}
}

// TestHeaderFieldTooLarge: a request with a header field above 8 KiB
// (name and value) is S3's 400 RequestHeaderSectionTooLarge, with S3's
// message and MaxSizeAllowed 8192, before it is routed or authenticated:
// whatever its operation, signed or not. A field of 8 KiB is read.
func TestHeaderFieldTooLarge(t *testing.T) {
	d := newDoor(t, doorOptions{})
	const name = "X-Amz-Custom-Header"
	tests := []struct {
		name, method, target string
		valueBytes           int
		signed               bool
		tooLarge             bool
	}{
		{"PutObject signed", http.MethodPut, "/" + d.bucket + "/object", 8 << 10, true, true},
		{"ListObjectsV2 signed", http.MethodGet, "/" + d.bucket + "?list-type=2", 8 << 10, true, true},
		{"unknown operation unsigned", http.MethodPut, "/" + d.bucket + "?website", 9 << 10, false, true},
		{"object read of 8 KiB", http.MethodGet, "/" + d.bucket + "/object", 8<<10 - len(name), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, d.url+tt.target, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(name, strings.Repeat("d", tt.valueBytes))
			var resp *http.Response
			if tt.signed {
				resp = d.rawRequest(t, writerKey, req, nil)
			} else {
				resp, err = d.srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
			}
			if resp.StatusCode == http.StatusOK {
				if tt.tooLarge {
					t.Fatalf("answered 200; want 400 RequestHeaderSectionTooLarge")
				}
				return
			}
			e := readS3Error(t, resp)
			got := resp.StatusCode == http.StatusBadRequest && e.Code == "RequestHeaderSectionTooLarge"
			switch {
			case tt.tooLarge && !got:
				t.Errorf("answered %d %s (%s); want 400 RequestHeaderSectionTooLarge", resp.StatusCode, e.Code, e.Message)
			case !tt.tooLarge && got:
				t.Errorf("a field of 8 KiB answered %d %s (%s)", resp.StatusCode, e.Code, e.Message)
			case tt.tooLarge && (e.Message != "Your request header section exceeds the maximum allowed size." || e.MaxSizeAllowed != "8192" || e.Size != ""):
				t.Errorf("message %q, MaxSizeAllowed %q, Size %q; want S3's message, 8192 and no Size", e.Message, e.MaxSizeAllowed, e.Size)
			}
		})
	}
}
