package api

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Sessions and locks: the wire types of fencegate's lock API (POST
// /v1/sessions, POST /v1/locks/{name}, ...), shared by the gateway, the token
// store and the Go SDK.

// Session TTL bounds, in seconds. A session is an etcd lease: it lives for
// its TTL after its last keepalive.
const (
	// DefaultSessionTTL is the TTL of a session created with ttl 0.
	DefaultSessionTTL = 10
	// MinSessionTTL and MaxSessionTTL bound the TTL a client may ask
	// for. etcd may grant more than asked (never less than its own
	// minimum, 1.5 election timeouts rounded up).
	MinSessionTTL = 1
	MaxSessionTTL = 3600
)

// MaxLockWait bounds the long poll of POST /v1/locks/{name}: a client that
// wants to wait longer polls again (see [LockRequest]).
const MaxLockWait = 60 * time.Second

// MaxLockNameBytes is the longest lock name.
const MaxLockNameBytes = 128

// SessionID names a session: the ID of the etcd lease behind it. On the
// wire it is lowercase hexadecimal without leading zeros (as etcd's own
// concurrency package names lease-bound keys), such as "694d8a3f0c1b2e07".
// The zero SessionID means "no session".
type SessionID int64

// String returns id in lowercase hexadecimal.
func (id SessionID) String() string { return strconv.FormatInt(int64(id), 16) }

// MarshalText encodes id as String does, so that JSON carries it as a
// string.
func (id SessionID) MarshalText() ([]byte, error) {
	if id <= 0 {
		return nil, fmt.Errorf("%w: session id %d is not positive", ErrInvalidRequest, int64(id))
	}
	return []byte(id.String()), nil
}

// UnmarshalText parses a session id with ParseSessionID.
func (id *SessionID) UnmarshalText(b []byte) error {
	parsed, err := ParseSessionID(string(b))
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}

// ParseSessionID parses a session id: 1 to 16 lowercase hexadecimal digits
// without leading zeros, for a value in [1, 2^63-1]. Anything else is
// ErrInvalidRequest.
func ParseSessionID(s string) (SessionID, error) {
	if s == "" || len(s) > 16 || s[0] == '0' {
		return 0, fmt.Errorf("%w: session id %q: want 1 to 16 lowercase hex digits without leading zeros", ErrInvalidRequest, s)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return 0, fmt.Errorf("%w: session id %q: want lowercase hex digits", ErrInvalidRequest, s)
		}
	}
	n, err := strconv.ParseUint(s, 16, 64)
	if err != nil || n > math.MaxInt64 {
		return 0, fmt.Errorf("%w: session id %q is above 2^63-1", ErrInvalidRequest, s)
	}
	return SessionID(n), nil
}

// ValidateLockName checks a lock name: 1 to MaxLockNameBytes bytes of ASCII
// letters, digits, '.', '_' and '-', and neither "." nor "..". Names never
// hold '/', so that one lock's queue is never inside another's. Failures
// are ErrInvalidRequest.
func ValidateLockName(name string) error {
	if name == "" || len(name) > MaxLockNameBytes {
		return fmt.Errorf("%w: lock name must be 1 to %d bytes", ErrInvalidRequest, MaxLockNameBytes)
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: lock name may not be %q", ErrInvalidRequest, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: lock name may hold only letters, digits, '.', '_' and '-'", ErrInvalidRequest)
		}
	}
	return nil
}

// SessionRequest is the body of POST /v1/sessions.
type SessionRequest struct {
	// TTL is the session's time to live in seconds, from MinSessionTTL to
	// MaxSessionTTL. Zero means DefaultSessionTTL.
	TTL int64 `json:"ttl"`
}

// Session is the answer of POST /v1/sessions and of POST
// /v1/sessions/{id}/keepalive.
type Session struct {
	ID SessionID `json:"session"`
	// TTL is the session's time to live in seconds, as granted: the
	// session expires TTL seconds after the server handled the creation or
	// the last keepalive, unless kept alive again.
	TTL int64 `json:"ttl"`
}

// LockRequest is the body of POST /v1/locks/{name}.
type LockRequest struct {
	// Session is the session the grant is bound to: when it ends (revoked
	// or expired), the lock is released.
	Session SessionID `json:"session"`
	// Wait is how long to wait for the lock, in seconds, at most
	// MaxLockWait. Zero means do not wait: answer at once, with the grant
	// or with lock-timeout. A wait that runs out takes the caller out of
	// the queue.
	Wait float64 `json:"wait"`
}

// LockGrant is the answer of POST /v1/locks/{name} when the lock is held.
type LockGrant struct {
	Name    string    `json:"name"`
	Token   Token     `json:"token"`
	Session SessionID `json:"session"`
}

// LockState is the answer of GET /v1/locks/{name}.
type LockState struct {
	Name string `json:"name"`
	// Held is true when a session holds the lock.
	Held bool `json:"held"`
	// Holder is the current holder's token, only for a request that names
	// the holder's session (GET /v1/locks/{name}?session=<id>) and may use
	// it; zero otherwise, and when the lock is free. The token is all that
	// a write guarded by a "held" token check needs, so it goes only to
	// whoever could get it back by acquiring again with that session.
	Holder Token `json:"holder,omitempty"`
	// QueueLength counts the holder and the waiters behind it.
	QueueLength int64 `json:"queue_length"`
}

// LockRelease is the answer of DELETE /v1/locks/{name}?token=N.
type LockRelease struct {
	Name  string `json:"name"`
	Token Token  `json:"token"`
	// Released is true when this request removed the grant (or queue
	// place) with that token, false when it was already gone: released
	// before, or its session ended. A newer holder is never touched.
	Released bool `json:"released"`
}

// LockNotHeldError is the detail of an ErrLockNotHeld refusal: a write
// whose token is not the current holder's of the lock bound to the
// resource.
//
// It never carries the holder's token: under a "held" check that token is
// all a write needs, and the caller, who does not hold the lock with the
// token it sent, must not learn it from the refusal (nor anyone who reads
// the refusal in a log).
type LockNotHeldError struct {
	Resource Resource
	Lock     string
	Token    Token
	// Held is true when another token holds the lock, false when nobody
	// does: its holder released it or its session ended, and nobody has
	// acquired it since.
	Held bool
}

func (e *LockNotHeldError) Error() string {
	state := "the lock is free"
	if e.Held {
		state = "another token holds it"
	}
	return fmt.Sprintf("token %d does not hold lock %q that guards %s: %s", e.Token, e.Lock, e.Resource, state)
}

// Unwrap makes errors.Is(err, ErrLockNotHeld) true.
func (e *LockNotHeldError) Unwrap() error { return ErrLockNotHeld }
