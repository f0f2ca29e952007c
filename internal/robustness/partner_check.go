package robustness

import (
	"fmt"
	"sort"
	"strings"

	"fencegate/api"
)

// checkPartners runs the partner shape's checkers. A partner cannot check
// tokens itself, so what the gateway promises it is what the partner
// recorded:
//
//   - partner-exclusive: it never had two requests for one account in
//     progress at once;
//   - partner-tokens-monotonic: the tokens it received for each account,
//     in arrival order, never decrease;
//   - partner-plausible: no token above etcd's revision (which no lock of
//     the cluster can have issued) reached it, nor became an account's
//     mark, under the gateways' "*=plausible" token checks;
//   - partner-at-most-once: each request (one request id and idempotency
//     key, however many attempts) reached it at most once;
//   - partner-refused-not-forwarded: a request whose every attempt was
//     refused (stale, implausible, busy, fence unavailable) never reached
//     it;
//   - partner-acked-forwarded: a request answered 2xx reached it;
//   - partner-unexpected-answer: every answer is one the route can give.
func checkPartners(ev PartnerEvidence) []Violation {
	var out []Violation
	for _, check := range []func(PartnerEvidence) []Violation{
		checkPartnerExclusive,
		checkPartnerTokensMonotonic,
		checkPartnerPlausible,
		checkPartnerOnce,
	} {
		out = append(out, check(ev)...)
	}
	return out
}

func violation(check, format string, args ...any) Violation {
	return Violation{Check: check, Detail: fmt.Sprintf(format, args...)}
}

// checkPartnerExclusive: one request per account at a time.
func checkPartnerExclusive(ev PartnerEvidence) []Violation {
	var out []Violation
	for _, c := range ev.Calls {
		if c.Overlapped {
			out = append(out, violation("partner-exclusive", "%s: request %s (token %d, call %d) reached the partner while %s was still in progress there",
				c.Account, c.Request, c.Token, c.Seq, c.OverlapWith))
		}
	}
	return out
}

// checkPartnerTokensMonotonic: per account, tokens in arrival order never
// decrease.
func checkPartnerTokensMonotonic(ev PartnerEvidence) []Violation {
	var out []Violation
	type seen struct {
		token   api.Token
		request string
	}
	largest := make(map[string]seen)
	for _, c := range ev.Calls {
		if prev, ok := largest[c.Account]; ok && c.Token < prev.token {
			out = append(out, violation("partner-tokens-monotonic", "%s: request %s with token %d reached the partner (call %d) after %s with the larger token %d",
				c.Account, c.Request, c.Token, c.Seq, prev.request, prev.token))
			continue
		}
		largest[c.Account] = seen{c.Token, c.Request}
	}
	return out
}

// checkPartnerPlausible: no implausible token forwarded, nor made a mark.
func checkPartnerPlausible(ev PartnerEvidence) []Violation {
	var out []Violation
	bound := api.Token(ev.Revision)
	for _, c := range ev.Calls {
		if c.Token > bound {
			out = append(out, violation("partner-plausible", "%s: request %s with token %d, above etcd's revision %d, reached the partner (call %d)",
				c.Account, c.Request, c.Token, ev.Revision, c.Seq))
		}
	}
	for _, account := range ev.Accounts {
		if hwm := ev.HWM[account]; hwm > bound {
			out = append(out, violation("partner-plausible", "%s: the mark is %d at the end, above etcd's revision %d",
				account, hwm, ev.Revision))
		}
		for _, e := range ev.HWMEvents[account] {
			if !e.Deleted && e.Token > bound {
				out = append(out, violation("partner-plausible", "%s: the mark was raised to %d at revision %d, above etcd's revision %d at the end",
					account, e.Token, e.Revision, ev.Revision))
				break
			}
		}
	}
	return out
}

// checkPartnerOnce: each request reaches the partner at most once, not at
// all if every attempt was refused, and once if one was acked; and every
// answer is one the route gives.
func checkPartnerOnce(ev PartnerEvidence) []Violation {
	var out []Violation
	calls := make(map[string]int)
	for _, c := range ev.Calls {
		calls[c.Request]++
	}
	known := make(map[string]bool, len(ev.Ops))
	for _, op := range ev.Ops {
		known[op.ID] = true
		n := calls[op.ID]
		if n > 1 {
			out = append(out, violation("partner-at-most-once", "%s: request %s (token %d) reached the partner %d times in %d attempts",
				op.Account, op.ID, op.Token, n, len(op.Attempts)))
		}
		refused, acked := true, false
		for _, a := range op.Attempts {
			switch a.Outcome() {
			case Acked:
				acked, refused = true, false
			case Refused, RefusedStale:
			case Failed:
				refused = false
				out = append(out, violation("partner-unexpected-answer", "%s: request %s via %s: %s", op.Account, op.ID, a.Gateway, a.Err))
			default:
				refused = false
			}
		}
		switch {
		case refused && n > 0:
			out = append(out, violation("partner-refused-not-forwarded", "%s: request %s (token %d) was refused (%s), but reached the partner",
				op.Account, op.ID, op.Token, attemptsString(op.Attempts)))
		case acked && n == 0:
			out = append(out, violation("partner-acked-forwarded", "%s: request %s (token %d) was answered %s, but never reached the partner",
				op.Account, op.ID, op.Token, attemptsString(op.Attempts)))
		}
	}
	var unknown []string
	for request := range calls {
		if !known[request] {
			unknown = append(unknown, request)
		}
	}
	sort.Strings(unknown)
	for _, request := range unknown {
		out = append(out, violation("partner-at-most-once", "request %q reached the partner %d times, but the workload never sent it", request, calls[request]))
	}
	return out
}

// attemptsString lists attempts' answers: "409 stale-token, 503 resource-busy".
func attemptsString(attempts []PartnerAttempt) string {
	var parts []string
	for _, a := range attempts {
		switch {
		case a.Status == 0:
			parts = append(parts, "no answer")
		case a.ProblemType != "":
			parts = append(parts, fmt.Sprintf("%d %s", a.Status, strings.TrimPrefix(a.ProblemType, api.ProblemTypePrefix)))
		default:
			parts = append(parts, fmt.Sprint(a.Status))
		}
	}
	return strings.Join(parts, ", ")
}
