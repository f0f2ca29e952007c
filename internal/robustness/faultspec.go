package robustness

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// LinkFault is what a fault proxy does to the traffic of one link. The
// zero LinkFault forwards everything untouched.
type LinkFault struct {
	// Delay holds every chunk of bytes, in both directions, for Delay
	// plus or minus a uniform Jitter, never reordering a stream. Zero
	// means no delay.
	Delay  time.Duration
	Jitter time.Duration
	// BlackholeTx holds what the dialer sends (requests do not arrive);
	// BlackholeRx holds what the target sends back (requests arrive,
	// answers do not). Connections stay open and the peers see silence;
	// when the fault is lifted, the held bytes go on in order, as TCP
	// retransmission delivers them after a partition heals.
	BlackholeTx bool
	BlackholeRx bool
	// Drop closes every connection, and each new one as soon as it is
	// accepted: the peers see a port that refuses service.
	Drop bool
	// Reset, when the fault is applied, aborts the connections open at
	// that moment with a TCP RST. It is one-shot: it does not outlive the
	// call that applies it.
	Reset bool
	// From limits the fault to connections from these sources (etcd
	// member names, learned from the X-Server-From header of peer
	// traffic). Empty means every connection.
	From []string
}

// maxDelay bounds Delay plus Jitter: a longer delay is a blackhole.
const maxDelay = 10 * time.Second

// IsZero reports whether f forwards everything untouched.
func (f LinkFault) IsZero() bool {
	return f.Delay == 0 && f.Jitter == 0 && !f.BlackholeTx && !f.BlackholeRx && !f.Drop && !f.Reset && len(f.From) == 0
}

// String returns f in the syntax ParseLinkFault reads; "none" for the zero
// fault.
func (f LinkFault) String() string {
	var items []string
	if f.Delay != 0 || f.Jitter != 0 {
		item := "delay=" + f.Delay.String()
		if f.Jitter != 0 {
			item += "+-" + f.Jitter.String()
		}
		items = append(items, item)
	}
	switch {
	case f.BlackholeTx && f.BlackholeRx:
		items = append(items, "blackhole=both")
	case f.BlackholeTx:
		items = append(items, "blackhole=tx")
	case f.BlackholeRx:
		items = append(items, "blackhole=rx")
	}
	if f.Drop {
		items = append(items, "drop")
	}
	if f.Reset {
		items = append(items, "reset")
	}
	if len(f.From) > 0 {
		items = append(items, "from="+strings.Join(f.From, "|"))
	}
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ",")
}

// ParseLinkFault reads a link fault: "none", or comma-separated items
//
//	delay=100ms        every chunk held 100 ms
//	delay=100ms+-50ms  held 50 to 150 ms (also written 100ms±50ms)
//	blackhole=tx|rx|both
//	drop
//	reset
//	from=member-1|member-2
//
// Each item at most once. It is what the nemesis prints for each fault,
// and what ROBUSTNESS_LINK_FAULT takes to run a history with one fault on
// every link.
func ParseLinkFault(s string) (LinkFault, error) {
	var f LinkFault
	s = strings.TrimSpace(s)
	if s == "" {
		return f, errors.New("link fault: empty (write none for no fault)")
	}
	if s == "none" {
		return f, nil
	}
	if len(s) > 1024 {
		return f, errors.New("link fault: longer than 1024 bytes")
	}
	seen := make(map[string]bool)
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		name, value, hasValue := strings.Cut(item, "=")
		if seen[name] {
			return LinkFault{}, fmt.Errorf("link fault %q: %s given twice", s, name)
		}
		seen[name] = true
		switch name {
		case "delay":
			if !hasValue {
				return LinkFault{}, fmt.Errorf("link fault %q: delay needs a value, such as delay=100ms+-50ms", s)
			}
			d, j, err := parseDelay(value)
			if err != nil {
				return LinkFault{}, fmt.Errorf("link fault %q: %w", s, err)
			}
			f.Delay, f.Jitter = d, j
		case "blackhole":
			switch value {
			case "tx":
				f.BlackholeTx = true
			case "rx":
				f.BlackholeRx = true
			case "both":
				f.BlackholeTx, f.BlackholeRx = true, true
			default:
				return LinkFault{}, fmt.Errorf("link fault %q: blackhole=%q: want tx, rx or both", s, value)
			}
		case "drop", "reset":
			if hasValue {
				return LinkFault{}, fmt.Errorf("link fault %q: %s takes no value", s, name)
			}
			if name == "drop" {
				f.Drop = true
			} else {
				f.Reset = true
			}
		case "from":
			for source := range strings.SplitSeq(value, "|") {
				if !validSource(source) {
					return LinkFault{}, fmt.Errorf("link fault %q: from: source %q: want letters, digits, '-' or '_'", s, source)
				}
				if slices.Contains(f.From, source) {
					return LinkFault{}, fmt.Errorf("link fault %q: from: source %q given twice", s, source)
				}
				f.From = append(f.From, source)
			}
		default:
			return LinkFault{}, fmt.Errorf("link fault %q: unknown item %q (want delay, blackhole, drop, reset or from)", s, item)
		}
	}
	return f, nil
}

// parseDelay reads "100ms", "100ms+-50ms" or "100ms±50ms".
func parseDelay(s string) (delay, jitter time.Duration, err error) {
	base, spread, hasJitter := strings.Cut(s, "+-")
	if !hasJitter {
		base, spread, hasJitter = strings.Cut(s, "±")
	}
	delay, err = parseNonNegativeDuration(base)
	if err != nil {
		return 0, 0, fmt.Errorf("delay %q: %w", s, err)
	}
	if hasJitter {
		jitter, err = parseNonNegativeDuration(spread)
		if err != nil {
			return 0, 0, fmt.Errorf("delay %q: jitter: %w", s, err)
		}
		if jitter == 0 || jitter > delay {
			return 0, 0, fmt.Errorf("delay %q: jitter must be above zero and at most the delay", s)
		}
	}
	if delay == 0 {
		return 0, 0, fmt.Errorf("delay %q: must be above zero", s)
	}
	if delay+jitter > maxDelay {
		return 0, 0, fmt.Errorf("delay %q: at most %v in all (longer is a blackhole)", s, maxDelay)
	}
	return delay, jitter, nil
}

func parseNonNegativeDuration(s string) (time.Duration, error) {
	// Only plain forms such as 100ms or 1.5s: no signs, no mixed units.
	if s == "" || strings.ContainsAny(s, "+- ") {
		return 0, fmt.Errorf("%q: want a duration such as 100ms", s)
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q: want a duration such as 100ms", s)
	}
	return d, nil
}

// validSource reports whether s can name a traffic source.
func validSource(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// affects reports whether f applies to a connection from source.
func (f LinkFault) affects(source string) bool {
	return len(f.From) == 0 || slices.Contains(f.From, source)
}

// sampleDelay returns one chunk's delay.
func (f LinkFault) sampleDelay(rnd func(n int64) int64) time.Duration {
	if f.Jitter == 0 {
		return f.Delay
	}
	return f.Delay - f.Jitter + time.Duration(rnd(int64(2*f.Jitter)+1))
}

// formatMillis is a short duration for logs: "850ms".
func formatMillis(d time.Duration) string {
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}
