package tokenstore

import (
	"fmt"
	"strconv"

	"fencegate/api"
)

// encodedWidth is the fixed width of a stored token. etcd compares values as
// bytes, so every token is stored zero-padded to this width: then byte order
// is numeric order.
const encodedWidth = 20

// encodeToken returns t as a 20-digit zero-padded decimal.
func encodeToken(t api.Token) string {
	return fmt.Sprintf("%0*d", encodedWidth, uint64(t))
}

// decodeToken parses a stored value written by encodeToken.
func decodeToken(b []byte) (api.Token, error) {
	if len(b) != encodedWidth {
		return 0, fmt.Errorf("stored token %q: want %d digits", b, encodedWidth)
	}
	n, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stored token %q: %w", b, err)
	}
	return api.Token(n), nil
}
