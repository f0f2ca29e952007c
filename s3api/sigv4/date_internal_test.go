package sigv4

import (
	"testing"
	"time"
)

// FuzzAmzDate holds parseAmzDate to what time.Parse reads of an
// X-Amz-Date in amzDateFormat, exactly 16 characters, which it replaces
// for its cost: the same time, and the same refusals (a month, day, hour,
// minute or second out of its range, a day past its month's end, a sign
// or a space among the digits).
func FuzzAmzDate(f *testing.F) {
	for _, seed := range []string{
		"20261207T031504Z", "20240229T000000Z", "20250229T000000Z", "20261131T120000Z", "20261301T000000Z",
		"20260001T000000Z", "20260100T000000Z", "20260101T240000Z", "20260101T236000Z", "20260101T235960Z",
		"00000101T000000Z", "99991231T235959Z", "2026-1-01T00000Z", "+0260101T000000Z", "20260101 000000Z",
		"20260101T000000z", "20260101t000000Z", "20260101T00000+Z", "20260101T000000Z1", "2026010T000000Z",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseAmzDate(s)
		want, err := time.Parse(amzDateFormat, s)
		wantOK := err == nil && len(s) == len(amzDateFormat)
		if ok != wantOK || ok && !got.Equal(want) {
			t.Fatalf("parseAmzDate(%q) = %v, %v; time.Parse gives %v, %v", s, got, ok, want, err)
		}
	})
}
