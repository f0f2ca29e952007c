package robustness

import (
	"fmt"
	"math"
	"net/http"
	"sort"

	"github.com/anishathalye/porcupine"

	"fencegate/api"
)

// The porcupine model: one fenced register per object. Its state is the
// object's current version: whether it exists, the token it records and
// the operation that wrote it.
//
//   - an acked write with token t is legal only if t >= the current
//     version's token (every token already written), and if the version
//     it reports it replaced (its If-Match, or "absent" for a create) is
//     the current one; it makes itself current. The second condition
//     orders a write after the version it replaced, which the call and
//     return times alone cannot when the two were concurrent;
//   - a refused write (stale, conflict, fence unavailable) changes
//     nothing: the gateway promises it wrote nothing;
//   - an ambiguous write either changes nothing or, if t >= the current
//     token, makes itself current, at any time after its call (as in
//     etcd's robustness tests, it never returns);
//   - a delete is a write that leaves the object absent, with its token
//     as the one a later version must reach (the mark stays behind as a
//     tombstone); an acked delete with token t is legal only if t >= the
//     current token;
//   - a read returns the current version exactly;
//   - a seed (an object the harness placed in the bucket's directory, not
//     through a gateway, before anything else) makes an object that
//     exists, records token 0 and has no ETag. A write that observes such
//     an object has no version to make its PUT conditional on, so the
//     gateway must refuse it: a 502 answer to a write while the object is
//     a seed changes nothing (not "ambiguous"). A write acked on top of a
//     seed reports that it replaced the ETag "": it is legal only while
//     the seed is current, like any other acked write;
//   - a write that S3's record shows landing by the ETag ABA shape
//     (findETagABA: its If-Match named the ETag of a version it observed,
//     and the object had gone back to those exact bytes under a larger
//     token; or its If-None-Match: * found the object absent again) may
//     replace a version with that ETag (or the absence) whatever its token:
//     the conditional PUT compares ETags, not versions, and the gateway
//     documents this limit. The checkers name it as a finding.

type registerInput struct {
	write  bool
	delete bool
	seed   bool
	key    string
	token  api.Token
	value  string // the writing op's id
	etag   string // its body's entity tag
	// abaOn is, for a write that S3's record shows landing by the ETag
	// ABA shape (findETagABA), the ETag its If-Match named, or abaAbsent
	// for its If-None-Match: *: it may land on a version with that ETag
	// (on an absent object) whatever the token the state carries.
	abaOn string
}

type registerOutput struct {
	outcome Outcome
	// status is a write's HTTP answer (0 if none).
	status int
	// For acked writes: the version replaced, if known.
	replacedKnown bool
	created       bool
	replaced      string
	// For reads:
	exists bool
	value  string
	token  api.Token
}

// registerState is an object's current version. An object that exists
// with etag "" is a seed: its ETag is unknown (S3 gives none).
type registerState struct {
	exists bool
	token  api.Token
	value  string
	etag   string
}

// etagless reports whether the current version is one without an ETag.
func (st registerState) etagless() bool { return st.exists && st.etag == "" }

// landsByABA reports whether in, a write that landed by the ETag ABA
// shape, may replace st: st holds the bytes its If-Match named, or is
// absent for its If-None-Match: *.
func (in registerInput) landsByABA(st registerState) bool {
	if in.abaOn == abaAbsent {
		return !st.exists
	}
	return in.abaOn != "" && st.exists && st.etag == in.abaOn
}

// ambiguousReturn is the return time given to ambiguous operations: later
// than anything in a history.
const ambiguousReturn = math.MaxInt64 / 2

// registerModel is the fenced register, partitioned by object.
var registerModel = (&porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := make(map[string][]porcupine.Operation)
		var keys []string
		for _, op := range history {
			k := op.Input.(registerInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []interface{} { return []interface{}{registerState{}} },
	Step: func(state, input, output interface{}) []interface{} {
		st, in, out := state.(registerState), input.(registerInput), output.(registerOutput)
		if in.seed {
			if st == (registerState{}) {
				return []interface{}{registerState{exists: true, value: in.value}}
			}
			return nil
		}
		if !in.write && !in.delete {
			if out.exists == st.exists && (!st.exists || out.value == st.value && out.token == st.token) {
				return []interface{}{st}
			}
			return nil
		}
		written := registerState{exists: true, token: in.token, value: in.value, etag: in.etag}
		if in.delete {
			written = registerState{token: in.token}
		}
		switch out.outcome {
		case Acked:
			replacedCurrent := in.delete || !out.replacedKnown ||
				out.created && !st.exists ||
				!out.created && st.exists && out.replaced == st.etag
			if (in.token >= st.token || in.landsByABA(st)) && replacedCurrent {
				return []interface{}{written}
			}
			return nil
		case Ambiguous:
			if out.status == http.StatusBadGateway && st.etagless() {
				return []interface{}{st} // refused: no ETag to be conditional on
			}
			if in.token >= st.token || in.landsByABA(st) {
				return []interface{}{st, written}
			}
			return []interface{}{st}
		default:
			return []interface{}{st}
		}
	},
	Equal: func(a, b interface{}) bool { return a.(registerState) == b.(registerState) },
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(registerInput), output.(registerOutput)
		if in.seed {
			return fmt.Sprintf("seed(%s, no ETag)", in.value)
		}
		if in.delete {
			return fmt.Sprintf("delete(%s@%d) -> %s", in.value, in.token, out.outcome)
		}
		if !in.write {
			if !out.exists {
				return "read() -> absent"
			}
			return fmt.Sprintf("read() -> %s@%d", out.value, out.token)
		}
		switch {
		case out.outcome != Acked || !out.replacedKnown:
			return fmt.Sprintf("write(%s@%d) -> %s", in.value, in.token, out.outcome)
		case out.created:
			return fmt.Sprintf("write(%s@%d) -> ok, created", in.value, in.token)
		}
		return fmt.Sprintf("write(%s@%d) -> ok, replaced %s", in.value, in.token, out.replaced)
	},
	DescribeState: func(state interface{}) string {
		st := state.(registerState)
		if !st.exists {
			return "absent"
		}
		if st.etag == "" {
			return fmt.Sprintf("%s@%d, no ETag", st.value, st.token)
		}
		return fmt.Sprintf("%s@%d %s", st.value, st.token, st.etag)
	},
}).ToModel()

// porcupineOps turns a history into porcupine operations. Failed reads,
// the steps of multipart uploads other than their completions (which are
// writes) and ticket requests (the writes on their tickets are writes)
// are left out; ambiguous writes never return.
func porcupineOps(ops []Op) []porcupine.Operation { return registerOps(ops, nil) }

// registerOps is porcupineOps, with abaOn giving the ETag that each write
// which landed by the ETag ABA shape named in its If-Match, by op id.
func registerOps(ops []Op, abaOn map[string]string) []porcupine.Operation {
	var out []porcupine.Operation
	for _, op := range ops {
		if op.Outcome == Failed || op.Kind.step() {
			continue
		}
		in := registerInput{write: op.Kind == OpWrite, delete: op.Kind == OpDelete, seed: op.Kind == OpSeed, key: op.Key, token: op.Token, value: op.ID, etag: op.ETag, abaOn: abaOn[op.ID]}
		o := registerOutput{outcome: op.Outcome, status: op.Status, exists: op.ReadExists, value: op.ReadValue, token: op.ReadToken,
			replacedKnown: op.ReplacedKnown, created: op.Created, replaced: op.Replaced}
		ret := op.Return
		if op.Outcome == Ambiguous {
			ret = ambiguousReturn
		}
		out = append(out, porcupine.Operation{ClientId: op.Process, Input: in, Call: op.Call, Output: o, Return: ret, Metadata: op.Gateway})
	}
	return out
}
