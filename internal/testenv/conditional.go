package testenv

import "net/http"

// ConditionalRead is one conditional GET or HEAD of an object: the
// request headers to send (name, value pairs, in order) and the status
// RFC 9110 and S3 answer.
type ConditionalRead struct {
	Name   string
	Header [][2]string
	Status int
}

// ConditionalReads are the conditional reads that both of fencegate's
// read paths (the REST API and the S3 API) must answer as S3 does, of an
// object whose ETag is etag: other is another ETag, before and after are
// HTTP dates before and after the object's Last-Modified. They cover
// If-None-Match and If-Modified-Since (304), If-Match and
// If-Unmodified-Since (412), which of two conditions decides, and a
// Range that a failed condition overrides.
func ConditionalReads(etag, other, before, after string) []ConditionalRead {
	return []ConditionalRead{
		{"If-None-Match current", [][2]string{{"If-None-Match", etag}}, http.StatusNotModified},
		{"If-None-Match *", [][2]string{{"If-None-Match", "*"}}, http.StatusNotModified},
		{"If-Modified-Since after", [][2]string{{"If-Modified-Since", after}}, http.StatusNotModified},
		{"If-None-Match current wins over If-Modified-Since before", [][2]string{{"If-None-Match", etag}, {"If-Modified-Since", before}}, http.StatusNotModified},
		{"If-None-Match other wins over If-Modified-Since after", [][2]string{{"If-None-Match", other}, {"If-Modified-Since", after}}, http.StatusOK},
		{"If-None-Match current with a Range", [][2]string{{"If-None-Match", etag}, {"Range", "bytes=0-2"}}, http.StatusNotModified},
		{"If-Match other", [][2]string{{"If-Match", other}}, http.StatusPreconditionFailed},
		{"If-Unmodified-Since before", [][2]string{{"If-Unmodified-Since", before}}, http.StatusPreconditionFailed},
		{"If-Match other with a Range", [][2]string{{"If-Match", other}, {"Range", "bytes=0-2"}}, http.StatusPreconditionFailed},
	}
}
