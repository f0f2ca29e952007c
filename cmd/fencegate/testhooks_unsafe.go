//go:build fencegate_unsafe_hooks

package main

// The unsafe test hooks themselves, compiled only into test builds (go
// build -tags fencegate_unsafe_hooks): see testhooks.go.

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"fencegate/api"
	"fencegate/gateway"
)

// pauseBound bounds one pause-after-fence wait, whatever the controller
// does.
const pauseBound = 30 * time.Second

// unsafeHookSpec is a parsed FENCEGATE_UNSAFE_TEST_HOOKS.
type unsafeHookSpec struct {
	swapOrder           bool
	unconditionalWrite  bool
	unconditionalTicket bool
	// pauseAfterFence is the controller's host:port, or "".
	pauseAfterFence string
}

// parseUnsafeTestHooks reads the value of FENCEGATE_UNSAFE_TEST_HOOKS.
func parseUnsafeTestHooks(value string) (unsafeHookSpec, error) {
	var spec unsafeHookSpec
	seen := make(map[string]bool)
	for item := range strings.SplitSeq(value, ",") {
		item = strings.TrimSpace(item)
		name, arg, hasArg := strings.Cut(item, "=")
		if seen[name] {
			return unsafeHookSpec{}, fmt.Errorf("%s: %q given twice", unsafeTestHooksEnv, name)
		}
		seen[name] = true
		switch {
		case name == "swap-order" && !hasArg:
			spec.swapOrder = true
		case name == "unconditional-write" && !hasArg:
			spec.unconditionalWrite = true
		case name == "unconditional-ticket" && !hasArg:
			spec.unconditionalTicket = true
		case name == "pause-after-fence" && hasArg:
			addr, err := netip.ParseAddrPort(arg)
			if err != nil || !addr.Addr().IsLoopback() || addr.Port() == 0 {
				return unsafeHookSpec{}, fmt.Errorf("%s: pause-after-fence=%q: want a loopback IP:port, such as 127.0.0.1:9000", unsafeTestHooksEnv, arg)
			}
			spec.pauseAfterFence = addr.String()
		default:
			return unsafeHookSpec{}, fmt.Errorf("%s: unknown item %q (want swap-order, unconditional-write, unconditional-ticket or pause-after-fence=IP:PORT)", unsafeTestHooksEnv, item)
		}
	}
	return spec, nil
}

// checkUnsafeTestHooksEnv reports whether FENCEGATE_UNSAFE_TEST_HOOKS is
// unset, empty or a valid list, so that serve and dev refuse a bad value
// with their other checks, before they start anything.
func checkUnsafeTestHooksEnv(lookupEnv lookupEnvFunc) error {
	value, ok := lookupEnv(unsafeTestHooksEnv)
	if !ok || strings.TrimSpace(value) == "" {
		return nil
	}
	_, err := parseUnsafeTestHooks(value)
	return err
}

// unsafeTestHooks returns the test hooks that FENCEGATE_UNSAFE_TEST_HOOKS
// asks for, and logs loudly that they are on. Unset or empty, it returns
// nil: no hooks, the production protocol.
func unsafeTestHooks(lookupEnv lookupEnvFunc, logger *slog.Logger) (*gateway.TestHooks, error) {
	value, ok := lookupEnv(unsafeTestHooksEnv)
	if !ok || strings.TrimSpace(value) == "" {
		return nil, nil
	}
	spec, err := parseUnsafeTestHooks(value)
	if err != nil {
		return nil, &usageError{Err: err}
	}
	hooks := &gateway.TestHooks{
		UnsafeFenceBeforeObserve:  spec.swapOrder,
		UnsafeUnconditionalWrite:  spec.unconditionalWrite,
		UnsafeUnconditionalTicket: spec.unconditionalTicket,
	}
	if spec.pauseAfterFence != "" {
		hooks.AfterFenceCheck = pauseAfterFence(spec.pauseAfterFence, logger)
	}
	logger.Error("UNSAFE TEST HOOKS ARE ON: this gateway runs a protocol changed for fault-injection tests; "+
		"never run it with real data (unset "+unsafeTestHooksEnv+")",
		"env", unsafeTestHooksEnv, "value", value,
		"swap_order", spec.swapOrder, "unconditional_write", spec.unconditionalWrite, "unconditional_ticket", spec.unconditionalTicket,
		"pause_after_fence", spec.pauseAfterFence, "build_tag", unsafeHooksBuildTag)
	return hooks, nil
}

// pauseAfterFence returns a hook that tells the controller at addr about
// each accepted fence check ("after-fence TOKEN RESOURCE\n") and waits for
// its answer line, at most pauseBound and never past the request's end.
// A controller that cannot be reached does not pause anything.
func pauseAfterFence(addr string, logger *slog.Logger) func(context.Context, api.Resource, api.Token) {
	return func(ctx context.Context, resource api.Resource, token api.Token) {
		dialer := net.Dialer{Timeout: time.Second}
		conn, err := dialer.DialContext(ctx, "tcp", addr)
		if err != nil {
			logger.Warn("pause-after-fence: controller unreachable; not pausing", "addr", addr, "err", err)
			return
		}
		defer conn.Close()
		deadline := time.Now().Add(pauseBound)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		_ = conn.SetDeadline(deadline)
		stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
		defer stop()
		if _, err := fmt.Fprintf(conn, "after-fence %d %s\n", token, resource); err != nil {
			return
		}
		_, _ = bufio.NewReader(conn).ReadString('\n')
	}
}
