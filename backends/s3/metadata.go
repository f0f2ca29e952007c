package s3

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"fencegate/api"
)

// An object's metadata (api.ObjectMetadata) travels as S3's headers on a
// write and comes back the same way on a read: x-amz-meta-NAME for user
// metadata, and Cache-Control, Content-Disposition, Content-Encoding,
// Content-Language and Expires as themselves. The token's own entry
// (x-amz-meta-fence-token) is written from the token, never from
// ObjectMetadata.User, and read back as api.Object.Token only.

// userMetadataPrefix starts the header of each user metadata entry.
const userMetadataPrefix = "X-Amz-Meta-"

// standardHeaders are the headers of api.ObjectMetadata but User, by
// setMetadataHeaders sets m on the headers of a write (the signed path's
// PUT). The token's entry is the caller's.
func setMetadataHeaders(h http.Header, m api.ObjectMetadata) {
	for name, value := range m.User {
		if strings.EqualFold(name, api.MetadataFenceToken) {
			continue
		}
		h[http.CanonicalHeaderKey(userMetadataPrefix+name)] = []string{value}
	}
	for _, s := range api.MetadataHeaders {
		if v := *s.Field(&m); v != "" {
			h[s.Name] = []string{v}
		}
	}
}

// metadataFromHeaders reads an object's metadata from the headers of
// S3's answer to a read (the signed path's HEAD).
func metadataFromHeaders(h http.Header) api.ObjectMetadata {
	var m api.ObjectMetadata
	for k, values := range h {
		if len(k) <= len(userMetadataPrefix) || !strings.EqualFold(k[:len(userMetadataPrefix)], userMetadataPrefix) || len(values) == 0 {
			continue
		}
		name := strings.ToLower(k[len(userMetadataPrefix):])
		if name == api.MetadataFenceToken {
			continue
		}
		if m.User == nil {
			m.User = make(map[string]string)
		}
		m.User[name] = strings.Join(values, ",")
	}
	for _, s := range api.MetadataHeaders {
		*s.Field(&m) = h.Get(s.Name)
	}
	return m
}

// sdkUserMetadata is the SDK's Metadata of a write: m's user metadata and
// the token's entry.
func sdkUserMetadata(m api.ObjectMetadata, token api.Token) map[string]string {
	out := make(map[string]string, len(m.User)+1)
	for name, value := range m.User {
		if !strings.EqualFold(name, api.MetadataFenceToken) {
			out[strings.ToLower(name)] = value
		}
	}
	out[api.MetadataFenceToken] = token.String()
	return out
}

// sdkExpires is Expires for the SDK, which takes a time: nil when m has
// none, or when it is not an HTTP date (front doors refuse those).
func sdkExpires(m api.ObjectMetadata) *time.Time {
	if m.Expires == "" {
		return nil
	}
	t, err := http.ParseTime(m.Expires)
	if err != nil {
		return nil
	}
	return aws.Time(t)
}

// optional is s for the SDK: nil when empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return aws.String(s)
}

// metadataFromSDK is an object's metadata from the SDK's read answers.
// expires is the answer's unparsed Expires (ExpiresString).
func metadataFromSDK(user map[string]string, cacheControl, contentDisposition, contentEncoding, contentLanguage, expires *string) api.ObjectMetadata {
	m := api.ObjectMetadata{
		CacheControl:       aws.ToString(cacheControl),
		ContentDisposition: aws.ToString(contentDisposition),
		ContentEncoding:    aws.ToString(contentEncoding),
		ContentLanguage:    aws.ToString(contentLanguage),
		Expires:            aws.ToString(expires),
	}
	for k, v := range user {
		name := strings.ToLower(k)
		if name == api.MetadataFenceToken {
			continue
		}
		if m.User == nil {
			m.User = make(map[string]string, len(user))
		}
		m.User[name] = v
	}
	return m
}

// tagging is the x-amz-tagging of a write of m: its tags as a URL query
// ("a=1&b=2"), as S3 takes them; "" when it has none.
func tagging(m api.ObjectMetadata) string {
	if len(m.Tags) == 0 {
		return ""
	}
	q := make(url.Values, len(m.Tags))
	for k, v := range m.Tags {
		q.Set(k, v)
	}
	return q.Encode()
}
