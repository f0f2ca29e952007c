package s3api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"fencegate/api"
)

// TestObjectMetadata reads the metadata of writes, accepted and refused.
func TestObjectMetadata(t *testing.T) {
	tests := []struct {
		name   string
		query  string
		header http.Header
		store  string
		want   string // fmt of the result, when accepted
		err    error
	}{
		{name: "none", want: fmt.Sprint(api.ObjectMetadata{})},
		{name: "user and standard", header: http.Header{"X-Amz-Meta-Mtime": {"1.5"}, "X-Amz-Meta-Fence-Token": {"7"}, "Cache-Control": {"no-cache"}},
			want: fmt.Sprint(api.ObjectMetadata{User: map[string]string{"mtime": "1.5"}, CacheControl: "no-cache"})},
		{name: "token in X-Fence-Token alone", header: http.Header{"X-Amz-Meta-Mtime": {"1.5"}, "X-Fence-Token": {"7"}},
			want: fmt.Sprint(api.ObjectMetadata{User: map[string]string{"mtime": "1.5", metadataTokenHidden: "1"}})},
		{name: "token in X-Fence-Token and metadata", header: http.Header{"X-Fence-Token": {"7"}, "X-Amz-Meta-Fence-Token": {"7"}},
			want: fmt.Sprint(api.ObjectMetadata{})},
		{name: "token in X-Fence-Token and the query", header: http.Header{"X-Fence-Token": {"7"}}, query: "X-Amz-Meta-Fence-Token=7",
			want: fmt.Sprint(api.ObjectMetadata{})},
		{name: "the gateway's own entry", header: http.Header{"X-Amz-Meta-Fence-Token-Hidden": {"1"}}, err: errInvalidArgument},
		{name: "limit counts the gateway's entry", header: http.Header{"X-Amz-Meta-A": {strings.Repeat("v", 2048-12-1-len(metadataTokenHidden))}, "X-Fence-Token": {"7"}}, err: errMetadataTooLarge},
		{name: "query of a presigned URL", query: "X-Amz-Meta-Mtime=2", want: fmt.Sprint(api.ObjectMetadata{User: map[string]string{"mtime": "2"}})},
		{name: "aws-chunked alone", header: http.Header{"Content-Encoding": {"aws-chunked"}}, want: fmt.Sprint(api.ObjectMetadata{})},
		{name: "aws-chunked and gzip", header: http.Header{"Content-Encoding": {"aws-chunked, gzip"}}, want: fmt.Sprint(api.ObjectMetadata{ContentEncoding: "gzip"})},
		{name: "empty value", header: http.Header{"X-Amz-Meta-Empty": {""}}, want: fmt.Sprint(api.ObjectMetadata{User: map[string]string{"empty": ""}})},
		{name: "at the limit", header: http.Header{"X-Amz-Meta-A": {strings.Repeat("v", 2048-12-1)}}, want: fmt.Sprint(api.ObjectMetadata{User: map[string]string{"a": strings.Repeat("v", 2048-12-1)}})},
		{name: "over the limit", header: http.Header{"X-Amz-Meta-A": {strings.Repeat("v", 2048-12)}}, err: errMetadataTooLarge},
		{name: "limit counts names", header: http.Header{"X-Amz-Meta-Ab": {strings.Repeat("v", 2048-12-1)}}, err: errMetadataTooLarge},
		{name: "twice", header: http.Header{"X-Amz-Meta-A": {"1", "2"}}, want: fmt.Sprint(api.ObjectMetadata{User: map[string]string{"a": "1,2"}})},
		{name: "header and query", header: http.Header{"X-Amz-Meta-A": {"1"}}, query: "x-amz-meta-a=1", err: errInvalidArgument},
		{name: "query in two cases", query: "x-amz-meta-a=1&X-Amz-Meta-A=2", want: fmt.Sprint(api.ObjectMetadata{User: map[string]string{"a": "2,1"}})},
		{name: "twice over the limit", header: http.Header{"X-Amz-Meta-A": {strings.Repeat("v", 1024), strings.Repeat("v", 1024-12-1)}}, err: errMetadataTooLarge},
		{name: "empty name", query: "x-amz-meta-=1", err: errInvalidArgument},
		{name: "CR LF", query: "x-amz-meta-a=1%0D%0AHost:%20evil", err: errInvalidArgument},
		{name: "tab", header: http.Header{"X-Amz-Meta-A": {"a\tb"}}, err: errInvalidArgument},
		{name: "DEL", header: http.Header{"Cache-Control": {"a\x7f"}}, err: errInvalidArgument},
		{name: "UTF-8", header: http.Header{"Content-Language": {"français"}}, err: errInvalidArgument},
		{name: "RFC 2047", header: http.Header{"X-Amz-Meta-A": {"=?UTF-8?B?w6k=?="}}, want: fmt.Sprint(api.ObjectMetadata{User: map[string]string{"a": "=?UTF-8?B?w6k=?="}})},
		{name: "Expires a date", header: http.Header{"Expires": {"Tue, 06 May 2031 07:08:09 GMT"}}, want: fmt.Sprint(api.ObjectMetadata{Expires: "Tue, 06 May 2031 07:08:09 GMT"})},
		{name: "Expires not a date", header: http.Header{"Expires": {"0"}}, err: errInvalidArgument},
		{name: "Cache-Control twice", header: http.Header{"Cache-Control": {"a", "b"}}, err: errInvalidArgument},
		{name: "Expires in GCS", header: http.Header{"Expires": {"Tue, 06 May 2031 07:08:09 GMT"}}, store: api.StoreGCS, err: errNotImplemented},
		{name: "Content-Encoding in GCS", header: http.Header{"Content-Encoding": {"gzip"}}, store: api.StoreGCS, err: errNotImplemented},
		{name: "aws-chunked in GCS", header: http.Header{"Content-Encoding": {"aws-chunked"}, "Cache-Control": {"x"}}, store: api.StoreGCS, want: fmt.Sprint(api.ObjectMetadata{CacheControl: "x"})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &http.Request{Header: tc.header, URL: &url.URL{Path: "/b/k", RawQuery: tc.query}}
			if r.Header == nil {
				r.Header = http.Header{}
			}
			got, err := objectMetadata(r, r.URL.Query(), 7, tc.store)
			switch {
			case tc.err != nil && !errors.Is(err, tc.err):
				t.Fatalf("objectMetadata = %+v, %v; want %v", got, err, tc.err)
			case tc.err == nil && (err != nil || fmt.Sprint(got) != tc.want):
				t.Fatalf("objectMetadata = %+v, %v; want %s", got, err, tc.want)
			}
		})
	}
}

// FuzzObjectMetadata: whatever a write sends, the metadata the door
// accepts is within S3's limit, named by lower-case HTTP tokens without
// the token's entry, and holds only printable ASCII.
func FuzzObjectMetadata(f *testing.F) {
	f.Add("mtime", "1.5", "x-amz-meta-a=b", "no-cache")
	f.Add("Fence-Token", "9", "x-amz-meta-a=%0d%0a", "é")
	f.Add("a", strings.Repeat("v", 2040), "X-Amz-Meta-B=1", "")
	f.Fuzz(func(t *testing.T, name, value, query, cacheControl string) {
		r := &http.Request{Header: http.Header{}, URL: &url.URL{RawQuery: query}}
		r.Header["X-Amz-Meta-"+name] = []string{value}
		r.Header["Cache-Control"] = []string{cacheControl}
		m, err := objectMetadata(r, r.URL.Query(), 123, api.StoreS3)
		if err != nil {
			return
		}
		size := len(api.MetadataFenceToken) + len("123")
		printable := func(s string) bool {
			for i := 0; i < len(s); i++ {
				if s[i] < 0x20 || s[i] > 0x7e {
					return false
				}
			}
			return true
		}
		for k, v := range m.User {
			size += len(k) + len(v)
			if k == api.MetadataFenceToken || k != strings.ToLower(k) || !isToken(k) || !printable(v) {
				t.Fatalf("accepted %q: %q", k, v)
			}
		}
		if size > maxUserMetadataBytes || !printable(m.CacheControl) {
			t.Fatalf("accepted %+v (%d bytes)", m, size)
		}
	})
}
