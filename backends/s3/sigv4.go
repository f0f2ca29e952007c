package s3

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"fencegate/internal/sigv4core"
)

// sigV4 signs the signed path's requests (a conditional PUT, a HEAD)
// exactly as the SDK's v4.Signer signs them with S3's settings
// (DisableURIPathEscaping, an unsigned payload): the same canonical
// request, headers, scope and Authorization header, byte for byte
// (TestSigV4SignsAsTheSDK compares the two on every kind of request the
// path sends). It exists for its cost: the SDK's signer builds the
// canonical request through maps, sorts and string joins, about 50
// allocations per request, a quarter of the write path's client-side
// CPU in BenchmarkPut; this one writes it into one buffer.
//
// Its scope is the signed path's requests only: header names in
// canonical form, one entry per name, set by newRequest; a query that is
// already canonical ("" or "x-id=PutObject"). Everything else the SDK
// signs itself.
//
// What signing and verifying compute alike (the signing key and its
// cache, header values, the string to sign) is package sigv4core's.
type sigV4 struct {
	// keys are the derived signing keys, each kept for as long as its
	// day, region and credentials are the ones signing.
	keys sigv4core.KeyCache
	// macs are HMACs keyed with a signing key (keyedMAC), reset and
	// reused: keying one costs more than the rest of the signature.
	macs sync.Pool
}

// keyedMAC is an HMAC-SHA256 keyed with key.
type keyedMAC struct {
	hash.Hash
	key *sigv4core.Key
}

// mac returns an HMAC keyed with the signing key of creds for day and
// region, to put back in s.macs once used.
func (s *sigV4) mac(creds aws.Credentials, day, region string) *keyedMAC {
	key := s.keys.Get(creds.AccessKeyID, creds.SecretAccessKey, day, region)
	if m, ok := s.macs.Get().(*keyedMAC); ok && m.key == key {
		m.Reset()
		return m
	}
	return &keyedMAC{Hash: hmac.New(sha256.New, key.Bytes()), key: key}
}

// lowerHeaderNames are the lower-case names of the headers the signed
// path sets, so that signing does not lower them each time.
var lowerHeaderNames = map[string]string{
	"Content-Type":         "content-type",
	"If-Match":             "if-match",
	"If-None-Match":        "if-none-match",
	"If-Modified-Since":    "if-modified-since",
	"If-Unmodified-Since":  "if-unmodified-since",
	"X-Amz-Content-Sha256": "x-amz-content-sha256",
	"X-Amz-Date":           "x-amz-date",
	"X-Amz-Security-Token": "x-amz-security-token",
	fenceTokenHeader:       strings.ToLower(fenceTokenHeader),
}

// sign signs req for region at time t with creds: it sets X-Amz-Date,
// X-Amz-Security-Token (session credentials) and Authorization, and drops
// a default port from req.Host, as the SDK's signer does. query is
// req.URL.RawQuery, already canonical; req's body is unsigned: its
// payload hash is the X-Amz-Content-Sha256 the caller set
// (UNSIGNED-PAYLOAD, or STREAMING-UNSIGNED-PAYLOAD-TRAILER).
func (s *sigV4) sign(creds aws.Credentials, req *http.Request, query, region string, t time.Time) {
	t = t.UTC()
	var dateBuf [16]byte
	amzDate := string(t.AppendFormat(dateBuf[:0], sigv4core.DateFormat))
	day := amzDate[:8]
	h := req.Header
	values := make([]string, 2) // X-Amz-Date's and Authorization's
	values[0] = amzDate
	h["X-Amz-Date"] = values[0:1:1]
	if creds.SessionToken != "" {
		h["X-Amz-Security-Token"] = []string{creds.SessionToken}
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if port := portOf(host); port != "" && isDefaultPort(req.URL.Scheme, port) {
		host = stripPort(host)
		req.Host = host
	}

	// The signed headers, lower case and sorted: host, content-length
	// when there is a body, and every header set but the ignored ones.
	type signed struct{ name, key string }
	var headerBuf [16]signed
	headers := append(headerBuf[:0], signed{"host", ""})
	if req.ContentLength > 0 {
		headers = append(headers, signed{"content-length", ""})
	}
	for k := range h {
		if sigv4core.IgnoredHeader(k) || strings.EqualFold(k, "Content-Length") {
			continue
		}
		name, ok := lowerHeaderNames[k]
		if !ok {
			name = strings.ToLower(k)
		}
		headers = append(headers, signed{name, k})
	}
	slices.SortFunc(headers, func(a, b signed) int { return strings.Compare(a.name, b.name) })

	buf := make([]byte, 0, 512)
	buf = append(buf, req.Method...)
	buf = append(buf, '\n')
	buf = append(buf, sigv4core.CanonicalURI(req.URL)...)
	buf = append(buf, '\n')
	buf = append(buf, query...)
	buf = append(buf, '\n')
	for _, hd := range headers {
		buf = append(buf, hd.name...)
		buf = append(buf, ':')
		switch hd.name {
		case "host":
			buf = append(buf, sigv4core.StripExcessSpaces(host)...)
		case "content-length":
			buf = strconv.AppendInt(buf, req.ContentLength, 10)
		default:
			buf = sigv4core.AppendHeaderValues(buf, h[hd.key])
		}
		buf = append(buf, '\n')
	}
	buf = append(buf, '\n')
	signedStart := len(buf)
	for i, hd := range headers {
		if i > 0 {
			buf = append(buf, ';')
		}
		buf = append(buf, hd.name...)
	}
	signedHeaders := string(buf[signedStart:])
	buf = append(buf, '\n')
	buf = sigv4core.AppendHeaderValues(buf, h["X-Amz-Content-Sha256"])
	canonicalHash := sha256.Sum256(buf)

	// The string to sign, then the Authorization header, in the same
	// buffer.
	buf = sigv4core.AppendStringToSign(buf[:0], amzDate, region, &canonicalHash)
	mac := s.mac(creds, day, region)
	mac.Write(buf)
	var sum [sha256.Size]byte
	signature := mac.Sum(sum[:0])
	s.macs.Put(mac)

	buf = append(buf[:0], sigv4core.Algorithm+" Credential="...)
	buf = append(buf, creds.AccessKeyID...)
	buf = append(buf, '/')
	buf = sigv4core.AppendScope(buf, day, region)
	buf = append(buf, ", SignedHeaders="...)
	buf = append(buf, signedHeaders...)
	buf = append(buf, ", Signature="...)
	buf = hex.AppendEncode(buf, signature)
	values[1] = string(buf)
	h["Authorization"] = values[1:2:2]
}

// RequestSigner signs a request as the SDK's v4 signer signs it with
// S3's settings, by the write path's own signer (sigV4): for a program
// that sends requests of the SDK's form with its own HTTP client, such as
// fencebench's S3 API cell. The zero value is ready to use; it is safe
// for concurrent use.
type RequestSigner struct{ sig sigV4 }

// Sign signs req for region at time t with creds, as sigV4.sign does:
// its headers set under their canonical names, its query
// (req.URL.RawQuery) already canonical, and its payload hash the
// X-Amz-Content-Sha256 it carries.
func (s *RequestSigner) Sign(creds aws.Credentials, req *http.Request, region string, t time.Time) {
	s.sig.sign(creds, req, req.URL.RawQuery, region, t)
}

// portOf, stripPort and isDefaultPort are the SDK signer's handling of
// the Host header: a port that is the scheme's default is dropped.
func portOf(hostport string) string {
	colon := strings.IndexByte(hostport, ':')
	if colon == -1 {
		return ""
	}
	if i := strings.Index(hostport, "]:"); i != -1 {
		return hostport[i+len("]:"):]
	}
	if strings.Contains(hostport, "]") {
		return ""
	}
	return hostport[colon+1:]
}

func stripPort(hostport string) string {
	colon := strings.IndexByte(hostport, ':')
	if colon == -1 {
		return hostport
	}
	if i := strings.IndexByte(hostport, ']'); i != -1 {
		return strings.TrimPrefix(hostport[:i], "[")
	}
	return hostport[:colon]
}

func isDefaultPort(scheme, port string) bool {
	if port == "" {
		return true
	}
	scheme = strings.ToLower(scheme)
	return scheme == "http" && port == "80" || scheme == "https" && port == "443"
}
