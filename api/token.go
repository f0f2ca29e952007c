package api

import (
	"fmt"
	"math"
	"strconv"
)

// Header names used on the wire.
const (
	// HeaderFenceToken carries the client's fencing token on requests, and
	// the token recorded on an object on responses.
	HeaderFenceToken = "X-Fence-Token"
	// HeaderFenceResource names the resource explicitly where a route
	// derives it from the request rather than from the path.
	HeaderFenceResource = "X-Fence-Resource"
)

// MaxToken is the largest valid fencing token, 2^63-1.
const MaxToken Token = math.MaxInt64

// tokenWidth is the number of decimal digits of MaxToken.
const tokenWidth = 19

// Token is a fencing token: a number in [1, MaxToken] issued by a
// linearizable, monotonic source (an etcd revision, a database sequence).
// The zero Token means "no token".
type Token uint64

// String returns the token in decimal.
func (t Token) String() string { return strconv.FormatUint(uint64(t), 10) }

// ParseTokenHeader parses the values of the X-Fence-Token header, as found in
// http.Header (all occurrences, in order). The grammar is strict: exactly one
// header, ASCII digits only, no sign, no spaces, no leading zero, and a value
// in [1, MaxToken]. No values at all is ErrMissingToken; anything else that
// does not fit is ErrMalformedToken.
func ParseTokenHeader(values []string) (Token, error) {
	switch len(values) {
	case 0:
		return 0, ErrMissingToken
	case 1:
		return ParseToken(values[0])
	default:
		return 0, fmt.Errorf("%w: %d %s headers, want exactly one", ErrMalformedToken, len(values), HeaderFenceToken)
	}
}

// ParseToken parses one token value with the grammar of ParseTokenHeader.
func ParseToken(s string) (Token, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: empty", ErrMalformedToken)
	}
	if len(s) > tokenWidth {
		return 0, fmt.Errorf("%w: more than %d digits", ErrMalformedToken, tokenWidth)
	}
	if s[0] == '0' {
		return 0, fmt.Errorf("%w: must be at least 1, without leading zeros", ErrMalformedToken)
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: only ASCII digits are allowed", ErrMalformedToken)
		}
		n = n*10 + uint64(c-'0') // 19 digits cannot overflow uint64
	}
	if n > uint64(MaxToken) {
		return 0, fmt.Errorf("%w: larger than 2^63-1", ErrMalformedToken)
	}
	return Token(n), nil
}
