package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// TestProblemGolden pins the wire form of every problem fencegate sends,
// one case per row of the error table.
func TestProblemGolden(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"stale-token", fmt.Errorf("fence check: %w", &StaleTokenError{Resource: "s3/dev/greeting", Token: 33, HighWaterMark: 34})},
		{"missing-token", ErrMissingToken},
		{"malformed-token", fmt.Errorf("%w: empty", ErrMalformedToken)},
		{"concurrent-modification", fmt.Errorf("s3 put dev/k: %w: 412", ErrConcurrentModification)},
		{"precondition-failed", fmt.Errorf("s3 get dev/greeting: %w: api error PreconditionFailed", ErrPreconditionFailed)},
		{"range-not-satisfiable", fmt.Errorf("s3 get dev/greeting: %w: api error InvalidRange", ErrRangeNotSatisfiable)},
		{"fence-unavailable", fmt.Errorf("fence check s3/dev/k: %w: context deadline exceeded", ErrUnavailable)},
		{"upstream-timeout", fmt.Errorf("s3 put dev/k: %w: %w", ErrUpstreamTimeout, ErrUpstream)},
		{"gateway-busy", fmt.Errorf("%w: the memory for buffered request bodies is in use by other requests", ErrGatewayBusy)},
		{"body-too-large", fmt.Errorf("%w: 10 bytes, limit 5", ErrBodyTooLarge)},
		{"internal", errors.New("secret detail that must not leak")},
		{"lock-not-held", fmt.Errorf("fence check: %w", &LockNotHeldError{Resource: "s3/reports/q3.csv", Lock: "report", Token: 33, Held: true})},
		{"implausible-token", fmt.Errorf("token check s3/reports/q3.csv: %w: token 9000 is above etcd's current revision 57", ErrImplausibleToken)},
		{"lock-timeout", fmt.Errorf("acquire report: %w after 5s", ErrLockTimeout)},
		{"session-not-found", fmt.Errorf("keep session alive 694d8a3f0c1b2e07: %w", ErrSessionNotFound)},
		{"idempotency-in-flight", fmt.Errorf("admit partner/payments/accounts/a1: %w", ErrIdempotencyInFlight)},
		{"idempotency-mismatch", fmt.Errorf("admit partner/payments/accounts/a1: %w", ErrIdempotencyMismatch)},
		{"resource-busy", fmt.Errorf("admit partner/payments/accounts/a1: %w: still in flight after 5s", ErrResourceBusy)},
		{"missing-idempotency-key", fmt.Errorf("route payments: %w", ErrMissingIdempotencyKey)},
		{"malformed-idempotency-key", fmt.Errorf("%w: only printable ASCII characters are allowed", ErrMalformedIdempotencyKey)},
		{"unauthorized", fmt.Errorf("%w: unknown API key", ErrUnauthorized)},
		{"forbidden", fmt.Errorf("%w: identity \"batch\" may not write \"s3/reports/q3.csv\"", ErrForbidden)},
		{"too-many-requests", fmt.Errorf("%w: 32 object requests of this client in flight", ErrTooManyRequests)},
		{"not-implemented", fmt.Errorf("%w: tickets are available for S3 buckets only", ErrNotImplemented)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.MarshalIndent(ProblemFor(tt.err), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "problems", tt.name+".json")
			if *update {
				if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if string(got)+"\n" != string(want) {
				t.Errorf("ProblemFor(%v) =\n%s\nwant (%s)\n%s", tt.err, got, golden, want)
			}
		})
	}
}

func TestProblemErrRoundTrip(t *testing.T) {
	for _, c := range classes {
		p := ProblemFor(fmt.Errorf("op: %w", c.err))
		if got := p.Err(); !errors.Is(got, c.err) {
			t.Errorf("ProblemFor(%v).Err() = %v; want errors.Is %v", c.err, got, c.err)
		}
	}
	stale := ProblemFor(&StaleTokenError{Resource: "s3/b/k", Token: 1, HighWaterMark: 2}).Err()
	var se *StaleTokenError
	if !errors.As(stale, &se) || se.HighWaterMark != 2 || se.Token != 1 {
		t.Errorf("stale problem Err() = %#v; want *StaleTokenError{Token: 1, HighWaterMark: 2}", stale)
	}
}

// TestProblemTypesUnique guards the table: each class must have its own
// problem type, or clients could not tell them apart.
func TestProblemTypesUnique(t *testing.T) {
	seen := map[string]error{}
	for _, c := range classes {
		if prev, ok := seen[c.slug]; ok {
			t.Errorf("problem type %q used by both %v and %v", c.slug, prev, c.err)
		}
		seen[c.slug] = c.err
	}
}

// TestStaleTokenErrorMessage pins the stale refusal's message, which is
// the detail of its problem body and of its audit line.
func TestStaleTokenErrorMessage(t *testing.T) {
	for _, e := range []StaleTokenError{
		{Token: 5, Resource: "s3/bucket/key", HighWaterMark: 10},
		{Token: 0, Resource: "", HighWaterMark: 1},
		{Token: math.MaxUint64 - 1, Resource: "partner/route/a b%c", HighWaterMark: math.MaxUint64},
	} {
		want := fmt.Sprintf("stale fencing token %d for %s: high-water mark is %d", uint64(e.Token), string(e.Resource), uint64(e.HighWaterMark))
		if got := e.Error(); got != want {
			t.Errorf("Error() = %q, want %q", got, want)
		}
	}
}

// TestTruncate checks that Truncate leaves short strings alone and cuts
// long ones between characters, with the marker, so that they take at
// most the limit once escaped in problem+json and in slog's text and
// JSON lines.
func TestTruncate(t *testing.T) {
	const limit = 64
	tests := []struct {
		name    string
		s       string
		wantCut bool
	}{
		{"empty", "", false},
		{"short", "/v1/objects/dev/k", false},
		{"at the limit", strings.Repeat("k", limit), false},
		{"one over", strings.Repeat("k", limit+1), true},
		{"invalid bytes", strings.Repeat("\x80", 20), true},
		{"control characters", strings.Repeat("\x01", 11), true},
		{"html characters", strings.Repeat("<&>", 4), true},
		{"quotes", strings.Repeat(`"\`, 17), true},
		{"multibyte", strings.Repeat("ü€😀", 10), true},
		{"multibyte fits", strings.Repeat("ü", 32), false},
		{"line separators", strings.Repeat("\u2028", 11), true},
		{"non-printable runes", strings.Repeat("\U000E0001", 7), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Truncate(tt.s, limit)
			marker := fmt.Sprintf("…(truncated, %d bytes)", len(tt.s))
			if !tt.wantCut {
				if got != tt.s {
					t.Fatalf("Truncate(%q) = %q; want it unchanged", tt.s, got)
				}
				return
			}
			kept, ok := strings.CutSuffix(got, marker)
			if !ok || !strings.HasPrefix(tt.s, kept) {
				t.Fatalf("Truncate(%q) = %q; want a prefix of it, then %q", tt.s, got, marker)
			}
			if utf8.ValidString(tt.s) && !utf8.ValidString(kept) {
				t.Errorf("Truncate(%q) = %q: cut inside a character", tt.s, got)
			}
			if len(kept) == 0 {
				t.Errorf("Truncate(%q) kept nothing", tt.s)
			}
			for encoding, size := range escapedSizes(kept) {
				if size > limit {
					t.Errorf("Truncate(%q) keeps %q, %d bytes in %s; want at most %d", tt.s, kept, size, encoding, limit)
				}
			}
		})
	}
}

// escapedSizes is how many bytes s takes, without its quotes, in each
// encoding that writes it: problem+json, slog's JSON and text lines.
func escapedSizes(s string) map[string]int {
	sizes := map[string]int{"problem+json": len(Problem{Instance: s}.AppendJSON(nil)) - len(Problem{Instance: "x"}.AppendJSON(nil)) + 1}
	for _, format := range []string{"json", "text"} {
		var with, without bytes.Buffer
		h := func(w io.Writer) *slog.Logger {
			if format == "json" {
				return slog.New(slog.NewJSONHandler(w, nil))
			}
			return slog.New(slog.NewTextHandler(w, nil))
		}
		h(&with).Info("m", "v", s)
		h(&without).Info("m", "v", "")
		// The time differs in the last digits at most; the quotes that an
		// empty text value does not need are 2 bytes.
		sizes["slog "+format] = with.Len() - without.Len() - 2
	}
	return sizes
}
