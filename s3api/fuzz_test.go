package s3api

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"fencegate/api"
)

// FuzzAddressAndRoute parses untrusted request lines: address and route
// never panic, a request they accept names a valid bucket, and every
// object write names a key; without a domain the Host never matters.
func FuzzAddressAndRoute(f *testing.F) {
	for _, seed := range []struct{ method, target, host string }{
		{"PUT", "/bucket/key", ""},
		{"PUT", "/bucket/a/../b", ""},
		{"PUT", "/bucket/a%2Fb?x-id=PutObject", "b.s3.example"},
		{"GET", "/bucket?list-type=2&prefix=a", ""},
		{"POST", "/bucket?delete", ""},
		{"PUT", "/key", "bucket.s3.example"},
		{"DELETE", "/bucket/k?uploadId=1", ""},
		{"GET", "/?x-amz-meta-fence-token=3", ""},
	} {
		f.Add(seed.method, seed.target, seed.host)
	}
	f.Fuzz(func(t *testing.T, method, target, host string) {
		u, err := url.ParseRequestURI(target)
		if err != nil || len(target) > 4096 {
			return
		}
		for _, domain := range []string{"", "s3.example"} {
			s := &server{cfg: Config{Domain: domain}}
			r := &http.Request{Method: method, URL: u, Host: host, Header: http.Header{}}
			rq := &request{query: r.URL.Query()}
			if err := s.address(r, rq); err != nil {
				continue
			}
			if rq.bucket != "" {
				if _, err := api.ParseObjectPath(rq.bucket, "k"); err != nil {
					t.Fatalf("%s %q host %q: bucket %q accepted", method, target, host, rq.bucket)
				}
			}
			if domain == "" {
				other := &request{}
				r.Host = "evil." + host
				if err := s.address(r, other); err != nil || other.bucket != rq.bucket || other.key != rq.key {
					t.Fatalf("%s %q: the Host changed the address without a domain", method, target)
				}
			}
			_, op := s.route(r, rq)
			switch op {
			case "PutObject", "DeleteObject", "CopyObject", "GetObject", "HeadObject":
				if rq.bucket == "" || rq.key == "" {
					t.Fatalf("%s %q: %s without bucket or key", method, target, op)
				}
			}
		}
	})
}

// FuzzFenceToken reads tokens from untrusted headers and queries: never a
// panic, and an accepted token is what every place that holds one says.
func FuzzFenceToken(f *testing.F) {
	f.Add("5", "", "")
	f.Add("5", "5", "x-amz-meta-fence-token=5")
	f.Add("5", "6", "")
	f.Add("", "", "X-Amz-Meta-Fence-Token=07&x-amz-meta-fence-token=7")
	f.Fuzz(func(t *testing.T, meta, fence, query string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		r := &http.Request{Header: http.Header{}, URL: &url.URL{RawQuery: q.Encode()}}
		if meta != "" {
			r.Header.Set(headerMetaFenceToken, meta)
		}
		if fence != "" {
			r.Header.Set(api.HeaderFenceToken, fence)
		}
		token, err := fenceToken(r, r.URL.Query(), []string{"x-fence-token"})
		if err != nil {
			return
		}
		if token == 0 {
			t.Fatalf("token 0 accepted")
		}
		for _, v := range []string{meta, fence} {
			if v != "" && v != token.String() {
				t.Fatalf("accepted %d where a header says %q", token, v)
			}
		}
		for name, values := range q {
			if strings.EqualFold(name, queryMetaFenceToken) {
				for _, v := range values {
					if v != token.String() {
						t.Fatalf("accepted %d where the query says %q", token, v)
					}
				}
			}
		}
	})
}

// FuzzCreateBucketConfiguration parses untrusted CreateBucket bodies:
// parseCreateBucketConfiguration never panics, and a body it accepts is
// one CreateBucketConfiguration with at most one LocationConstraint and
// nothing else in it.
func FuzzCreateBucketConfiguration(f *testing.F) {
	for _, seed := range []string{
		`<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LocationConstraint>eu-west-1</LocationConstraint></CreateBucketConfiguration>`,
		`<CreateBucketConfiguration/>`,
		`<CreateBucketConfiguration><Tags><Tag><Key>a</Key><Value>b</Value></Tag></Tags></CreateBucketConfiguration>`,
		`<CreateBucketConfiguration><Location><Type>AvailabilityZone</Type></Location></CreateBucketConfiguration>`,
		`<CreateBucketConfiguration></CreateBucketConfiguration><X/>`,
		`<Delete/>`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		config, err := parseCreateBucketConfiguration(data)
		if err != nil {
			return
		}
		if config.XMLName.Local != "CreateBucketConfiguration" || len(config.LocationConstraint) > 1 || len(config.Other) != 0 {
			t.Fatalf("%q accepted as %+v", data, config)
		}
	})
}
