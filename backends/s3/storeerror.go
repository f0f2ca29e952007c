package s3

import (
	"errors"
	"net/http"

	"github.com/aws/smithy-go"

	"fencegate/api"
)

// storeError wraps err, the failure of a request to S3, as the
// *api.StoreError of class, with S3's code and status when it answered.
// refused says whether S3 refused the request for what the client asked
// (api.StoreError.Refused): the S3 API then answers S3's code.
func storeError(class, err error, refused bool) error {
	se := &api.StoreError{Class: class, Err: err, Status: statusCode(err)}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		se.Code = apiErr.ErrorCode()
	}
	se.Refused = refused && se.Code != "" && se.Status >= 400 && se.Status < 500
	return se
}

// classOf returns the error class that mapped, an error of one of the
// classes that package upstream maps to, wraps.
func classOf(mapped error) error {
	for _, class := range []error{api.ErrNotFound, api.ErrPreconditionFailed, api.ErrRangeNotSatisfiable, api.ErrUpstreamTimeout} {
		if errors.Is(mapped, class) {
			return class
		}
	}
	return api.ErrUpstream
}

// refusedOther says whether S3's answer err, of no code the mappings
// name, refused the client's request (a 4xx, such as InvalidArgument),
// rather than the gateway's credentials or signature: those are the
// gateway's failure, answered as an upstream error.
func refusedOther(err error) bool {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || statusCode(err) == http.StatusForbidden {
		return false
	}
	switch apiErr.ErrorCode() {
	case "AccessDenied", "AccountProblem", "AllAccessDisabled", "AuthorizationHeaderMalformed", "AuthorizationQueryParametersError",
		"ExpiredToken", "InvalidAccessKeyId", "InvalidSecurity", "InvalidToken", "MissingSecurityHeader", "RequestTimeTooSkewed",
		"SignatureDoesNotMatch", "TokenRefreshRequired", "NotFound":
		return false
	}
	return true
}
