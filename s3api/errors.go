package s3api

import (
	"errors"
	"fmt"
	"net/http"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/s3api/sigv4"
)

// The refusals of the S3 dialect itself, which no other layer makes. Each
// is wrapped with the request's details (fmt.Errorf("%w: ...")) and
// answered by its row of s3Codes.
var (
	errNotImplemented    = errors.New("not implemented")
	errMalformedXML      = errors.New("malformed XML")
	errInvalidArgument   = errors.New("invalid argument")
	errInvalidBucketName = errors.New("invalid bucket name")
	errKeyTooLong        = errors.New("key too long")
	errNoSuchBucket      = errors.New("no such bucket")
	errBadDigest         = errors.New("bad digest")
	errInvalidDigest     = errors.New("invalid digest")
	errInvalidToken      = errors.New("security token not accepted")
	errEntityTooLarge    = errors.New("entity too large")
	// errHeaderFieldTooLarge is one header field above
	// maxHeaderFieldBytes (server.go).
	errHeaderFieldTooLarge = errors.New("header field too large")
	// errInvalidLocationConstraint refuses a CreateBucket for another
	// region than the door's.
	errInvalidLocationConstraint = errors.New("invalid location constraint")
)

// s3Code is one row of the error table: an error class and the S3 error
// code and status that answer it.
type s3Code struct {
	err    error
	code   string
	status int
}

// s3Codes is the one table that maps error classes (package api's, and the
// door's own above) to S3 error codes and statuses. The first match wins.
// Package sigv4's refusals carry their code and status themselves
// (*sigv4.Error). Anything else is InternalError (500), its details only
// in the log.
var s3Codes = []s3Code{
	{errNotImplemented, "NotImplemented", http.StatusNotImplemented},
	{errMalformedXML, "MalformedXML", http.StatusBadRequest},
	{errInvalidArgument, "InvalidArgument", http.StatusBadRequest},
	{errInvalidBucketName, "InvalidBucketName", http.StatusBadRequest},
	{errKeyTooLong, "KeyTooLongError", http.StatusBadRequest},
	{errNoSuchBucket, "NoSuchBucket", http.StatusNotFound},
	{errBadDigest, "BadDigest", http.StatusBadRequest},
	{errInvalidDigest, "InvalidDigest", http.StatusBadRequest},
	{errInvalidToken, "InvalidToken", http.StatusBadRequest},
	{errEntityTooLarge, "EntityTooLarge", http.StatusBadRequest},
	{errInvalidLocationConstraint, "InvalidLocationConstraint", http.StatusBadRequest},
	{errHeaderFieldTooLarge, "RequestHeaderSectionTooLarge", http.StatusBadRequest},
	{errMetadataTooLarge, "MetadataTooLarge", http.StatusBadRequest}, // metadata.go
	{errNoSuchUpload, "NoSuchUpload", http.StatusNotFound},           // multipart.go
	{errInvalidTag, "InvalidTag", http.StatusBadRequest},             // tagging.go
	{errTooManyTags, "BadRequest", http.StatusBadRequest},            // tagging.go
	// read.go:
	{errInvalidPartNumber, "InvalidPartNumber", http.StatusRequestedRangeNotSatisfiable},

	{api.ErrMissingToken, "MissingFenceToken", http.StatusPreconditionRequired},
	{api.ErrMalformedToken, "InvalidFenceToken", http.StatusBadRequest},
	{api.ErrStaleToken, "StaleFenceToken", http.StatusConflict},
	{api.ErrConcurrentModification, "ConditionalRequestConflict", http.StatusConflict},
	{api.ErrLockNotHeld, "LockNotHeld", http.StatusConflict},
	{api.ErrImplausibleToken, "ImplausibleFenceToken", http.StatusBadRequest},
	{api.ErrInvalidObjectPath, "InvalidArgument", http.StatusBadRequest},
	{api.ErrInvalidRequest, "InvalidRequest", http.StatusBadRequest},
	{api.ErrNotFound, "NoSuchKey", http.StatusNotFound},
	{api.ErrPreconditionFailed, "PreconditionFailed", http.StatusPreconditionFailed},
	{api.ErrRangeNotSatisfiable, "InvalidRange", http.StatusRequestedRangeNotSatisfiable},
	{api.ErrBodyTooLarge, "EntityTooLarge", http.StatusBadRequest},
	{api.ErrLengthRequired, "MissingContentLength", http.StatusLengthRequired},
	{api.ErrUnavailable, "ServiceUnavailable", http.StatusServiceUnavailable},
	{api.ErrGatewayBusy, "SlowDown", http.StatusServiceUnavailable},
	{api.ErrTooManyRequests, "SlowDown", http.StatusServiceUnavailable},
	{api.ErrUpstreamTimeout, "GatewayTimeout", http.StatusGatewayTimeout},
	{api.ErrUpstream, "BadGateway", http.StatusBadGateway},
	{api.ErrUnauthorized, "AccessDenied", http.StatusForbidden},
	{api.ErrForbidden, "AccessDenied", http.StatusForbidden},
	{api.ErrMethodNotAllowed, "MethodNotAllowed", http.StatusMethodNotAllowed},
	{api.ErrHeadersTooLarge, "RequestHeaderSectionTooLarge", http.StatusBadRequest},
	{api.ErrTargetTooLong, "RequestURITooLong", http.StatusRequestURITooLong},
}

// internalError answers errors of no known class.
var internalError = s3Code{code: "InternalError", status: http.StatusInternalServerError}

// maxMessageBytes bounds an error's Message, which may quote the request.
const maxMessageBytes = 1024

// s3ErrorOf returns the row that answers err and the message to send:
// S3's own for the code (s3Messages), else the door's text, which says
// what the gateway checked; for a code the store answered, never the
// store's text (which may name its request and host ids).
func s3ErrorOf(err error) (s3Code, string) {
	var refusal *sigv4.Error
	if errors.As(err, &refusal) {
		if refusal.Code == sigv4.ErrInternal.Code {
			return internalError, s3Messages[internalError.code]
		}
		return s3Code{code: refusal.Code, status: refusal.Status}, refusal.Message
	}
	var store *api.StoreError
	refused := errors.As(err, &store) && store.Refused
	for _, c := range s3Codes {
		if errors.Is(err, c.err) {
			if refused && errors.Is(store.Class, c.err) {
				// The store refused what the client asked, and no
				// layer made another class of it: S3's own answer.
				return s3Code{code: store.Code, status: store.Status}, storeMessage(store.Code)
			}
			if m, ok := s3Messages[c.code]; ok {
				return c, m
			}
			var cause *causeError
			if errors.As(err, &cause) {
				return c, cause.message
			}
			return c, api.Truncate(err.Error(), maxMessageBytes)
		}
	}
	return internalError, s3Messages[internalError.code]
}

// s3Messages are S3's messages for the codes whose message S3 words one
// way whatever the cause, sent whoever refused: the door (NoSuchUpload,
// MetadataTooLarge, ...) or the store. The codes whose message S3 words
// for each cause (InvalidArgument, InvalidRequest, AccessDenied,
// InvalidTag, ...) carry S3's message for the cause where the door has
// it (causeError), else the door's text, which says what it checked, as
// do the door's own codes (StaleFenceToken and the other fencing codes,
// NotImplemented for what S3 serves and the gateway does not); a Size or
// MaxSizeAllowed of S3's goes in members of their own (sizeError).
var s3Messages = map[string]string{
	"NoSuchBucket":                 "The specified bucket does not exist",
	"NoSuchKey":                    "The specified key does not exist.",
	"NoSuchUpload":                 "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.",
	"MetadataTooLarge":             "Your metadata headers exceed the maximum allowed metadata size",
	"RequestHeaderSectionTooLarge": "Your request header section exceeds the maximum allowed size.",
	"KeyTooLongError":              "Your key is too long",
	"InvalidBucketName":            "The specified bucket is not valid.",
	"MalformedXML":                 "The XML you provided was not well-formed or did not validate against our published schema",
	"InvalidPart":                  "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not match the part's entity tag.",
	"InvalidPartOrder":             "The list of parts was not in ascending order. The parts list must be specified in order by part number.",
	"EntityTooSmall":               "Your proposed upload is smaller than the minimum allowed object size.",
	"EntityTooLarge":               "Your proposed upload exceeds the maximum allowed object size.",
	"InvalidRange":                 "The requested range is not satisfiable",
	"InvalidPartNumber":            "The requested partnumber is not satisfiable",
	"PreconditionFailed":           "At least one of the pre-conditions you specified did not hold",
	"MissingContentLength":         "You must provide the Content-Length HTTP header.",
	"MethodNotAllowed":             "The specified method is not allowed against this resource.",
	"InvalidLocationConstraint":    "The specified location-constraint is not valid",
	"SlowDown":                     "Please reduce your request rate.",
	"InternalError":                "We encountered an internal error. Please try again.",

	// Bucket administration (bucketadmin.go):
	"BucketNotEmpty":          "The bucket you tried to delete is not empty",
	"BucketAlreadyOwnedByYou": "Your previous request to create the named bucket succeeded and you already own it.",
	"BucketAlreadyExists":     "The requested bucket name is not available. The bucket namespace is shared by all users of the system. Please select a different name and try again.",
}

// storeCauseMessages are S3's general messages for the codes whose
// message S3 words for each cause, sent when the store refused with one
// of them, in place of the store's text.
var storeCauseMessages = map[string]string{
	"InvalidArgument": "Invalid Argument",
	"InvalidRequest":  "Invalid Request",
}

// storeMessage is S3's message for code, which the store answered, or a
// sentence naming it.
func storeMessage(code string) string {
	if m, ok := s3Messages[code]; ok {
		return m
	}
	if m, ok := storeCauseMessages[code]; ok {
		return m
	}
	return "The object store refused the request: " + api.Truncate(code, 64)
}

// causeError is a refusal with a code that S3 words for each cause
// (InvalidRequest, InvalidArgument, InvalidTag, BadRequest), of a cause
// S3 has a message for: its class picks the code (s3Codes), message is
// S3's and answered as it is, detail (the door's, "" for none) goes to
// the log alone.
type causeError struct {
	class   error
	message string
	detail  string
}

func (e *causeError) Error() string {
	if e.detail == "" {
		return fmt.Sprintf("%v: %s", e.class, e.message)
	}
	return fmt.Sprintf("%v: %s (%s)", e.class, e.message, e.detail)
}

func (e *causeError) Unwrap() error { return e.class }

// sizeError is a refusal of a size, which S3 answers with the size and
// its limit in members of the error body: MetadataTooLarge (Size and
// MaxSizeAllowed), RequestHeaderSectionTooLarge (MaxSizeAllowed alone).
type sizeError struct {
	class error // errMetadataTooLarge, errHeaderFieldTooLarge
	what  string
	// size is what the request sent, in bytes; limit is the most allowed.
	size, limit int
	// answerSize says the answer carries size (S3's Size member).
	answerSize bool
}

func (e *sizeError) Error() string {
	return fmt.Sprintf("%v: %s is %d bytes, limit %d", e.class, e.what, e.size, e.limit)
}

func (e *sizeError) Unwrap() error { return e.class }

// errorBody is S3's error document.
type errorBody struct {
	XMLName   struct{} `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Size      int      `xml:"Size,omitempty"`
	MaxSize   int      `xml:"MaxSizeAllowed,omitempty"`
	Resource  string   `xml:"Resource,omitempty"`
	RequestID string   `xml:"RequestId"`
	// The fencing extension members, on stale refusals.
	FenceResource string `xml:"FenceResource,omitempty"`
	FenceToken    string `xml:"FenceToken,omitempty"`
	HighWaterMark string `xml:"HighWaterMark,omitempty"`
}

// writeError answers err as S3's XML error: the table's code and status,
// Retry-After on 503, and on a stale token X-Fence-High-Water-Mark. Errors
// answered 500 are logged with their details.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, rq *request, err error) {
	c, message := s3ErrorOf(err)
	edge.NoteErrorCode(r.Context(), c.code)
	s.noteRefusal(r, rq, err)
	switch store := api.StoreAnswer(err); {
	case c.status >= 500:
		s.log.ErrorContext(r.Context(), "s3 request failed", "request_id", rq.id, "op", rq.op, "status", c.status, "err", err, "store_answer", store)
	case store != "": // the store's own text stays in the log
		s.log.InfoContext(r.Context(), "s3 request refused by the store", "request_id", rq.id, "op", rq.op, "status", c.status, "code", c.code, "err", err, "store_answer", store)
	default:
		s.log.DebugContext(r.Context(), "s3 request refused", "request_id", rq.id, "op", rq.op, "status", c.status, "code", c.code, "err", err)
	}
	body := errorBody{Code: c.code, Message: message, Resource: api.Truncate(r.URL.Path, api.MaxEchoBytes), RequestID: rq.id}
	if size := (*sizeError)(nil); errors.As(err, &size) {
		body.MaxSize = size.limit
		if size.answerSize {
			body.Size = size.size
		}
	}
	var stale *api.StaleTokenError
	if errors.As(err, &stale) {
		w.Header().Set(headerHighWaterMark, stale.HighWaterMark.String())
		body.FenceResource = string(stale.Resource)
		body.FenceToken = stale.Token.String()
		body.HighWaterMark = stale.HighWaterMark.String()
	}
	if r.Method == http.MethodPut || r.Method == http.MethodPost {
		// The body may be unread (a refusal before it, a sender that
		// stalled): close the connection after the answer rather than
		// let net/http read up to 256 KiB of it first.
		w.Header().Set("Connection", "close")
	}
	if c.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(c.status) // S3 answers a HEAD with the status alone
		return
	}
	writeXML(w, c.status, body)
}

// headerHighWaterMark carries the resource's high-water mark on a stale
// refusal, as the REST API's problem body does.
const headerHighWaterMark = "X-Fence-High-Water-Mark"

// noteRefusal has the gateway count and audit the refusal of a write, as
// for the REST API, about the object the request named as the REST API
// names it (objectResource: by its bucket's store). A refusal of the signature counts as a failed
// authentication (api.ErrUnauthorized).
func (s *server) noteRefusal(r *http.Request, rq *request, err error) {
	var refusal *sigv4.Error
	if errors.As(err, &refusal) && refusal.Status == http.StatusForbidden {
		err = fmt.Errorf("%w: %w", api.ErrUnauthorized, err)
	}
	write := writeOps[rq.op]
	var resource api.Resource
	if write && rq.bucket != "" {
		resource = s.objectResource(rq.bucket, rq.key)
	}
	s.edge.NoteRefusal(r.Context(), write, resource, rq.token, err)
}
