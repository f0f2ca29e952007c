package main

import "runtime/debug"

// gcPercent is the garbage collector's target (GOGC) that fencegate runs
// with unless the GOGC environment variable says otherwise. Go's default,
// 100, collects each time the heap doubles; the gateway's live heap is
// small (buffers and requests in flight), so collecting when it has grown
// five times costs a few tens of MiB at most and saves much of the CPU
// that collections took on every request path (fencebench, docs/performance.md
// "Figures"). Bodies are streamed through fixed buffers, so the heap
// does not grow with object sizes.
const gcPercent = 400

// setGCPercent sets the collector's target to gcPercent when GOGC is not
// set, so that an operator's GOGC (or GOMEMLIMIT with GOGC=off) wins. It
// reports whether it set it.
func setGCPercent(lookupEnv lookupEnvFunc) bool {
	if _, ok := lookupEnv("GOGC"); ok {
		return false
	}
	debug.SetGCPercent(gcPercent)
	return true
}
