package s3api

import (
	"net/url"
	"strconv"
	"testing"

	"fencegate/api"
)

// FuzzPartNumber parses untrusted queries: partNumber never panics, and a
// part it accepts is 1 to api.MaxParts and the query's only partNumber,
// spelled exactly as the number is written (no other spelling of a
// number reads as a part).
func FuzzPartNumber(f *testing.F) {
	for _, seed := range []string{"", "partNumber=1", "partNumber=10000", "partNumber=10001", "partNumber=%2B1", "partNumber=01",
		"partNumber=1&partNumber=1", "partNumber=4294967297", "partNumber=%zz", "partNumber=2;x", "x-id=GetObject&partNumber=3"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, rawQuery string) {
		n, err := partNumber(rawQuery)
		if err != nil || n == 0 {
			return
		}
		q, perr := url.ParseQuery(rawQuery)
		if perr != nil || n < 1 || n > api.MaxParts || len(q["partNumber"]) != 1 || q.Get("partNumber") != strconv.Itoa(int(n)) {
			t.Fatalf("partNumber(%q) = %d; want it refused", rawQuery, n)
		}
	})
}
