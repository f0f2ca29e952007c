package rest

import (
	"net/http"
	"strconv"

	"fencegate/api"
)

// setObjectHeaders sets the headers of a read's answer and returns its
// status: 304 when obj is NotModified (with only ETag, Last-Modified and
// the token), 206 with Content-Range for a partial read, else 200. RFC
// 9110 section 15.4.5 asks a 304 to repeat the Cache-Control and Expires
// of the 200 to the same request; the REST API answers none of an
// object's stored metadata (obj.Metadata) on a 200, so its 304 carries
// none either, and none of the 200's Content-* headers.
func setObjectHeaders(h http.Header, obj *api.Object) int {
	h.Set("ETag", obj.ETag)
	if !obj.LastModified.IsZero() {
		h.Set("Last-Modified", obj.LastModified.UTC().Format(http.TimeFormat))
	}
	if obj.Token != 0 {
		h.Set(api.HeaderFenceToken, obj.Token.String())
	}
	if obj.NotModified {
		return http.StatusNotModified
	}
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Length", strconv.FormatInt(obj.Size, 10))
	if obj.ContentType != "" {
		h.Set("Content-Type", obj.ContentType)
	}
	if obj.ContentRange != "" {
		h.Set("Content-Range", obj.ContentRange)
		return http.StatusPartialContent
	}
	return http.StatusOK
}
