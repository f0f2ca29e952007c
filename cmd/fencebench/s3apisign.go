package main

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"fencegate/internal/sigv4core"
)

// requestSigner signs modeS3APINetHTTP's requests as the SDK's v4 signer
// signs them for S3 (the same canonical request, so the same
// Authorization at the same second: TestRequestSignerSignsAsTheSDK), for
// less CPU: the headers it signs are the template's, sorted once, and
// the day's key is kept, so a request costs one SHA-256 of its canonical
// request and one HMAC. With the SDK's signer, modeS3APINetHTTP's client
// took about 1.5 times the CPU per write of the REST cell's, and its
// gateway reached a tenth fewer writes a second in some runs.
type requestSigner struct {
	accessKey, secret, region string
	keys                      sigv4core.KeyCache
	// query is the canonical query of every request (they share one);
	// names the signed headers' names, in lower case, sorted, and
	// signedHeaders the same joined with ';'.
	query         string
	names         []string
	signedHeaders string
}

// newRequestSigner returns the signer of requests with template's
// headers and rawQuery's query, plus Host, Content-Length, X-Amz-Date and
// Amz-Sdk-Invocation-Id, all of which it signs but those the SDK never
// signs (sigv4core.IgnoredHeader).
func newRequestSigner(accessKey, secret, region, rawQuery string, template http.Header) (*requestSigner, error) {
	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, err
	}
	names := []string{"host", "content-length", "x-amz-date", "amz-sdk-invocation-id"}
	for name := range template {
		if lower := strings.ToLower(name); !sigv4core.IgnoredHeader(name) && !slices.Contains(names, lower) {
			names = append(names, lower)
		}
	}
	slices.Sort(names)
	return &requestSigner{
		accessKey: accessKey, secret: secret, region: region,
		// As the SDK's signer: sorted, escaped by url.Values, spaces
		// as %20.
		query: strings.ReplaceAll(query.Encode(), "+", "%20"),
		names: names, signedHeaders: strings.Join(names, ";"),
	}, nil
}

// sign sets r's X-Amz-Date to now and its Authorization, for a payload
// sent unsigned. r has the template's headers, Amz-Sdk-Invocation-Id,
// and the query it was made for.
func (s *requestSigner) sign(r *http.Request, now time.Time) {
	amzDate := now.UTC().Format(sigv4core.DateFormat)
	r.Header.Set("X-Amz-Date", amzDate)
	buf := make([]byte, 0, 1024)
	buf = append(buf, r.Method...)
	buf = append(buf, '\n')
	buf = append(buf, sigv4core.CanonicalURI(r.URL)...)
	buf = append(buf, '\n')
	buf = append(buf, s.query...)
	buf = append(buf, '\n')
	for _, name := range s.names {
		buf = append(buf, name...)
		buf = append(buf, ':')
		switch name {
		case "host":
			host := r.Host
			if host == "" {
				host = r.URL.Host
			}
			buf = append(buf, sigv4core.StripExcessSpaces(host)...)
		case "content-length":
			buf = strconv.AppendInt(buf, r.ContentLength, 10)
		default:
			buf = sigv4core.AppendHeaderValues(buf, r.Header.Values(name))
		}
		buf = append(buf, '\n')
	}
	buf = append(buf, '\n')
	buf = append(buf, s.signedHeaders...)
	buf = append(buf, '\n')
	buf = append(buf, v4UnsignedPayload...)
	hash := sha256.Sum256(buf)
	key := s.keys.Get(s.accessKey, s.secret, amzDate[:len(sigv4core.DayFormat)], s.region)
	signature := sigv4core.HMACSHA256(key.Bytes(), string(sigv4core.AppendStringToSign(buf[:0], amzDate, s.region, &hash)))

	auth := make([]byte, 0, 256)
	auth = append(auth, sigv4core.Algorithm+" Credential="...)
	auth = append(auth, s.accessKey...)
	auth = append(auth, '/')
	auth = sigv4core.AppendScope(auth, amzDate[:len(sigv4core.DayFormat)], s.region)
	auth = append(auth, ", SignedHeaders="...)
	auth = append(auth, s.signedHeaders...)
	auth = append(auth, ", Signature="...)
	auth = hex.AppendEncode(auth, signature)
	r.Header.Set("Authorization", string(auth))
}
