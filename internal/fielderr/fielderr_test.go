package fielderr

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// TestList finds every field error in what the validators return: one,
// joined ones in order, wrapped ones, and none.
func TestList(t *testing.T) {
	a, b, c := Errorf("a", "bad"), Errorf("b", "worse"), &Error{Field: "c", First: "a", Err: errors.New("again")}
	tests := []struct {
		name string
		err  error
		want []*Error
	}{
		{"nil", nil, nil},
		{"plain error", errors.New("x"), nil},
		{"one", a, []*Error{a}},
		{"joined, in order", errors.Join(a, b, c), []*Error{a, b, c}},
		{"wrapped join", fmt.Errorf("gateway: %w", errors.Join(b, errors.New("x"), a)), []*Error{b, a}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := List(tt.err); !slices.Equal(got, tt.want) {
				t.Errorf("List(%v) = %v; want %v", tt.err, got, tt.want)
			}
		})
	}
	if got, want := c.Error(), "c: again (first at a)"; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
}

// TestSize writes sizes as the config file does: the largest binary
// suffix that divides them.
func TestSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 1: "1", 1023: "1023", 1 << 10: "1KiB", 3 << 20: "3MiB", 5 << 30: "5GiB", 2 << 40: "2TiB", 1<<20 + 1: "1048577", 1536 << 10: "1536KiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q; want %q", n, got, want)
		}
	}
}

// TestHasControl: control characters and DEL, never printable text.
func TestHasControl(t *testing.T) {
	for s, want := range map[string]bool{"": false, "s3/dev/": false, "ünïcode": false, "a\nb": true, "\x00": true, "x\x7f": true, "tab\t": true} {
		if got := HasControl(s); got != want {
			t.Errorf("HasControl(%q) = %v; want %v", s, got, want)
		}
	}
}
