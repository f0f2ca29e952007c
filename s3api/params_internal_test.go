package s3api

import (
	"errors"
	"net/url"
	"testing"
)

// TestInt32Param: max-uploads and max-parts as S3 reads them: absent is
// 0 (the store's default); a number above the operation's most is that
// most, as S3 caps it (and answers it in MaxUploads, MaxParts); what is
// not an integer from 0 to 2^31-1 is InvalidArgument.
func TestInt32Param(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  int32
		bad   bool
	}{
		{query: "", want: 0},
		{query: "max-uploads=0", want: 0},
		{query: "max-uploads=7", want: 7},
		{query: "max-uploads=1000", want: 1000},
		{query: "max-uploads=1001", want: 1000},
		{query: "max-uploads=2147483647", want: 1000},
		{query: "max-uploads=2147483648", bad: true},
		{query: "max-uploads=-1", bad: true},
		{query: "max-uploads=ten", bad: true},
		{query: "max-uploads=", bad: true},
		{query: "max-uploads=+5", bad: true},
	} {
		q, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := int32Param(q, "max-uploads", 1000)
		switch {
		case tc.bad && !errors.Is(err, errInvalidArgument):
			t.Errorf("%q: got %d, %v; want InvalidArgument", tc.query, got, err)
		case !tc.bad && (err != nil || got != tc.want):
			t.Errorf("%q: got %d, %v; want %d", tc.query, got, err, tc.want)
		}
	}
}
