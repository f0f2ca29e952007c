package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestLockNotHeldErrorRoundTrip(t *testing.T) {
	err := fmt.Errorf("fence check: %w", &LockNotHeldError{Resource: "s3/b/k", Lock: "l", Token: 5})
	if !errors.Is(err, ErrLockNotHeld) {
		t.Fatalf("errors.Is(%v, ErrLockNotHeld) = false", err)
	}
	if got := ProblemFor(err).Err(); !errors.Is(got, ErrLockNotHeld) {
		t.Fatalf("ProblemFor(%v).Err() = %v; want ErrLockNotHeld", err, got)
	}
	if !strings.Contains(err.Error(), "the lock is free") {
		t.Errorf("Error() = %q; want it to say the lock is free", err)
	}
	held := &LockNotHeldError{Resource: "s3/b/k", Lock: "l", Token: 5, Held: true}
	if got := held.Error(); !strings.Contains(got, "another token holds it") {
		t.Errorf("Error() = %q; want it to say another token holds the lock", got)
	}
}

func TestParseSessionID(t *testing.T) {
	tests := []struct {
		in   string
		want SessionID
		ok   bool
	}{
		{"1", 1, true},
		{"694d8a3f0c1b2e07", 0x694d8a3f0c1b2e07, true},
		{"7fffffffffffffff", math.MaxInt64, true},
		{"8000000000000000", 0, false}, // 2^63
		{"ffffffffffffffff", 0, false},
		{"10000000000000000", 0, false}, // 17 digits
		{"", 0, false},
		{"0", 0, false},
		{"01", 0, false},
		{"ABC", 0, false},
		{"0x12", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{" 1", 0, false},
		{"1g", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseSessionID(tt.in)
		if tt.ok != (err == nil) || got != tt.want {
			t.Errorf("ParseSessionID(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("ParseSessionID(%q) error %v; want ErrInvalidRequest", tt.in, err)
		}
	}
}

func TestSessionIDJSON(t *testing.T) {
	b, err := json.Marshal(Session{ID: 0x2a, TTL: 10})
	if err != nil || string(b) != `{"session":"2a","ttl":10}` {
		t.Fatalf("json.Marshal(Session) = %s, %v", b, err)
	}
	var s Session
	if err := json.Unmarshal([]byte(`{"session":"2a","ttl":10}`), &s); err != nil || s.ID != 0x2a {
		t.Fatalf("json.Unmarshal = %+v, %v", s, err)
	}
	for _, bad := range []string{`{"session":42}`, `{"session":"2A"}`, `{"session":""}`} {
		if err := json.Unmarshal([]byte(bad), &s); err == nil {
			t.Errorf("json.Unmarshal(%s) succeeded; want an error", bad)
		}
	}
	if _, err := json.Marshal(LockRequest{}); err == nil {
		t.Error("json.Marshal(LockRequest{Session: 0}) succeeded; want an error (no session)")
	}
}

func TestValidateLockName(t *testing.T) {
	for _, ok := range []string{"job", "report-q3", "a.b_c", "A", strings.Repeat("x", MaxLockNameBytes), "..."} {
		if err := ValidateLockName(ok); err != nil {
			t.Errorf("ValidateLockName(%q) = %v; want nil", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a b", "é", "a\x00", "a%2f", strings.Repeat("x", MaxLockNameBytes+1)} {
		if err := ValidateLockName(bad); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("ValidateLockName(%q) = %v; want ErrInvalidRequest", bad, err)
		}
	}
}

// FuzzParseSessionID: session ids arrive in URL paths and JSON bodies.
// Every id accepted must print back to the same string and be positive.
func FuzzParseSessionID(f *testing.F) {
	for _, s := range []string{"1", "694d8a3f0c1b2e07", "7fffffffffffffff", "8000000000000000", "0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseSessionID(s)
		if err != nil {
			return
		}
		if id <= 0 || id.String() != s {
			t.Fatalf("ParseSessionID(%q) = %d, printed %q", s, id, id.String())
		}
		if n, err := strconv.ParseInt(s, 16, 64); err != nil || SessionID(n) != id {
			t.Fatalf("ParseSessionID(%q) = %d; strconv says %d, %v", s, id, n, err)
		}
	})
}

// FuzzValidateLockName: accepted names are safe as one etcd key segment
// and one URL path segment.
func FuzzValidateLockName(f *testing.F) {
	for _, s := range []string{"job", "..", "a/b", "report-q3.v2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidateLockName(s) != nil {
			return
		}
		if strings.ContainsAny(s, "/%?# \x00") || s == "." || s == ".." || len(s) > MaxLockNameBytes {
			t.Fatalf("ValidateLockName(%q) accepted an unsafe name", s)
		}
	})
}
