package conformance_test

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"fencegate/s3api/sigv4"
)

// tokenRelay stands between the conformance suite and the door as a
// well-behaved fencing client would: it adds a fencing token, larger
// than any before, to every object write that is not part of an upload,
// and signs the request again with the same credentials, as a client
// that holds the lock signs its token. Only a request whose own
// signature the door's verifier accepts is signed again, so a test that
// sends a bad signature still sends it. Everything else is forwarded as
// it came:
//
//   - reads, bucket requests, and the parts, completion and abort of an
//     upload (the id CreateMultipartUpload answered needs no token after
//     it; a different token there is refused);
//   - a body of signed chunks (STREAMING-AWS4-HMAC-SHA256-PAYLOAD...):
//     each chunk's signature chains from the request's, so another
//     signature would need every chunk signed again;
//   - a presigned URL whose signature does not verify.
//
// A presigned write that verifies gets its token in the query
// (X-Amz-Meta-Fence-Token) and is presigned again with the same date and
// expiry.
type relay struct {
	door     *url.URL
	verifier *sigv4.Verifier
	creds    aws.Credentials
	region   string
	token    atomic.Int64 // the last token added
	proxy    *httputil.ReverseProxy
	// resigned counts the requests signed again with a token;
	// forwarded counts writes forwarded as they came.
	resigned, forwarded atomic.Int64
}

// oneKey is the KeyStore of the relay's verifier: the suite's one key.
type oneKey struct{ id, secret string }

func (k oneKey) SecretKey(_ context.Context, id string) (string, string, error) {
	if id != k.id {
		return "", "", sigv4.ErrUnknownAccessKey
	}
	return k.secret, "conformance", nil
}

func newRelay(door *url.URL, accessKey, secretKey, region string) (*relay, error) {
	v, err := sigv4.New(sigv4.Config{Keys: oneKey{accessKey, secretKey}, Region: region})
	if err != nil {
		return nil, err
	}
	rl := &relay{
		door:     door,
		verifier: v,
		creds:    aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secretKey},
		region:   region,
	}
	rl.proxy = &httputil.ReverseProxy{
		// Rewrite keeps the Host the client signed and adds no
		// X-Forwarded-* header: the door sees the request as sent.
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = door.Scheme
			pr.Out.URL.Host = door.Host
			pr.Out.Host = pr.In.Host
		},
		FlushInterval: -1,
		ErrorLog:      nil,
	}
	return rl, nil
}

func (rl *relay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isTokenWrite(r) {
		if rl.sign(r) {
			rl.resigned.Add(1)
		} else {
			rl.forwarded.Add(1)
		}
	}
	rl.proxy.ServeHTTP(w, r)
}

// isTokenWrite reports whether r is a write that carries a fencing token
// through the door: PutObject, CopyObject, DeleteObject, DeleteObjects,
// CreateMultipartUpload and the object tagging writes.
func isTokenWrite(r *http.Request) bool {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	q := r.URL.Query()
	if bucket == "" || q.Has("uploadId") {
		return false
	}
	switch r.Method {
	case http.MethodPut, http.MethodDelete:
		return key != ""
	case http.MethodPost:
		return (key != "" && q.Has("uploads")) || (key == "" && q.Has("delete"))
	}
	return false
}

// sign adds the next token to r and signs it again, if r's own signature
// verifies and its body can be signed again; it reports whether it did.
func (rl *relay) sign(r *http.Request) bool {
	presigned := r.URL.Query().Has("X-Amz-Signature")
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if !presigned && (payload == "" || strings.HasPrefix(payload, "STREAMING-AWS4-HMAC-SHA256")) {
		return false
	}
	check := r.Clone(r.Context())
	check.Body = http.NoBody
	res, err := rl.verifier.Verify(r.Context(), check)
	if err != nil {
		return false
	}
	date, err := time.Parse("20060102T150405Z", firstOf(r.Header.Get("X-Amz-Date"), r.URL.Query().Get("X-Amz-Date")))
	if err != nil {
		return false
	}
	token := strconv.FormatInt(rl.token.Add(1), 10)
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	req := r.Clone(r.Context())
	req.URL.Scheme, req.URL.Host = "http", r.Host
	// Sign the headers the client signed, no others: what the relay
	// forwards of the rest may change on the way.
	signed := map[string]bool{}
	for _, h := range res.SignedHeaders {
		signed[h] = true
	}
	for name := range req.Header {
		if !signed[strings.ToLower(name)] {
			req.Header.Del(name)
		}
	}
	if presigned {
		q := req.URL.Query()
		for _, name := range []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Signature"} {
			q.Del(name)
		}
		q.Set("X-Amz-Meta-Fence-Token", token)
		req.URL.RawQuery = q.Encode()
		u, _, err := signer.PresignHTTP(r.Context(), rl.creds, req, "UNSIGNED-PAYLOAD", "s3", res.Region, date)
		if err != nil {
			return false
		}
		signedURL, err := url.Parse(u)
		if err != nil {
			return false
		}
		r.URL.RawQuery = signedURL.RawQuery
		return true
	}
	req.Header.Del("Authorization")
	req.Header.Set("X-Fence-Token", token)
	if err := signer.SignHTTP(r.Context(), rl.creds, req, payload, "s3", res.Region, date); err != nil {
		return false
	}
	r.Header.Set("X-Fence-Token", token)
	r.Header.Set("Authorization", req.Header.Get("Authorization"))
	return true
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
