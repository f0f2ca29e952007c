package sigv4

import (
	"errors"
	"net/http"
)

// Error is a refusal of a request, carrying the S3 error code and the HTTP
// status S3 answers it with, so a front door can render it as S3's XML error
// body. Message is safe to show to the client: it never contains a secret or
// an expected signature.
type Error struct {
	Code    string // S3 error code, e.g. "SignatureDoesNotMatch"
	Status  int    // HTTP status, e.g. 403
	Message string // human-readable, for the XML <Message>
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Is reports whether target is an *Error with the same Code, so callers can
// write errors.Is(err, sigv4.ErrSignatureDoesNotMatch).
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

func newError(base *Error, message string) *Error {
	return &Error{Code: base.Code, Status: base.Status, Message: message}
}

// The refusals this package produces. Each is compared by Code with
// errors.Is; the returned errors carry a message specific to the request.
var (
	ErrAccessDenied                      = &Error{"AccessDenied", http.StatusForbidden, "Access Denied"}
	ErrSignatureDoesNotMatch             = &Error{"SignatureDoesNotMatch", http.StatusForbidden, "The request signature we calculated does not match the signature you provided. Check your key and signing method."}
	ErrInvalidAccessKeyID                = &Error{"InvalidAccessKeyId", http.StatusForbidden, "The AWS Access Key Id you provided does not exist in our records."}
	ErrRequestTimeTooSkewed              = &Error{"RequestTimeTooSkewed", http.StatusForbidden, "The difference between the request time and the current time is too large."}
	ErrAuthorizationHeaderMalformed      = &Error{"AuthorizationHeaderMalformed", http.StatusBadRequest, "The authorization header is malformed."}
	ErrAuthorizationQueryParametersError = &Error{"AuthorizationQueryParametersError", http.StatusBadRequest, "The authorization query parameters are malformed."}
	ErrInvalidArgument                   = &Error{"InvalidArgument", http.StatusBadRequest, "Invalid argument."}
	ErrInvalidRequest                    = &Error{"InvalidRequest", http.StatusBadRequest, "Invalid request."}
	ErrMissingSecurityHeader             = &Error{"MissingSecurityHeader", http.StatusBadRequest, "Your request is missing a required header."}
	ErrXAmzContentSHA256Mismatch         = &Error{"XAmzContentSHA256Mismatch", http.StatusBadRequest, "The provided 'x-amz-content-sha256' header does not match what was computed."}
	ErrBadDigest                         = &Error{"BadDigest", http.StatusBadRequest, "The checksum you specified did not match the calculated checksum."}
	ErrInvalidDigest                     = &Error{"InvalidDigest", http.StatusBadRequest, "The checksum you specified is not valid."}
	ErrIncompleteBody                    = &Error{"IncompleteBody", http.StatusBadRequest, "You did not provide the number of bytes specified by the Content-Length HTTP header."}
	ErrMissingContentLength              = &Error{"MissingContentLength", http.StatusLengthRequired, "You must provide the Content-Length HTTP header."}
	ErrMalformedTrailer                  = &Error{"MalformedTrailerError", http.StatusBadRequest, "The request contained trailing data that was not well-formed or did not conform to our published schema."}
	ErrInternal                          = &Error{"InternalError", http.StatusInternalServerError, "We encountered an internal error. Please try again."}
)
