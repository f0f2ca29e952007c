// Package fielderr is the error of one field of a configuration, which
// the validators of fencegate's packages return and its commands name as
// their users know the field (a flag, a path in the config file).
package fielderr

import (
	"errors"
	"fmt"
	"strconv"
)

// Error is a problem with one field of a configuration. Field is the
// field's path, in the terms of fencegate's config file ("buffer_bytes",
// "partners[1].upstream", "partners[0].add_headers.X-Fence-Token",
// "identities[0].name", "api_keys[2]"); Err says what is wrong without
// naming the field, so that a caller can name it as its users know it (a
// flag, a line of a file). First, when not empty, is the path of an
// earlier field that this one repeats. The validators return these
// joined (errors.Join): errors.As finds the first, and a caller that
// wants each one unwraps the join (see List).
type Error struct {
	Field string
	First string
	Err   error
}

func (e *Error) Error() string {
	msg := e.Field + ": " + e.Err.Error()
	if e.First != "" {
		msg += " (first at " + e.First + ")"
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error of field.
func Errorf(field, format string, args ...any) *Error {
	return &Error{Field: field, Err: fmt.Errorf(format, args...)}
}

// List returns the *Error values in err, as the validators join them, in
// order; nil when err holds none.
func List(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		if fe, ok := err.(*Error); ok {
			out = append(out, fe)
			return
		}
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range joined.Unwrap() {
				walk(e)
			}
			return
		}
		if next := errors.Unwrap(err); next != nil {
			walk(next)
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// HasControl reports whether s holds an ASCII control character, which
// no name, prefix or header of a configuration may.
func HasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// Size formats n bytes with the largest binary suffix that divides
// it, as the size flags and the config file write sizes (8MiB, 65536).
func Size(n int64) string {
	if n == 0 {
		return "0"
	}
	for _, u := range []struct {
		suffix string
		factor int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n%u.factor == 0 {
			return strconv.FormatInt(n/u.factor, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
