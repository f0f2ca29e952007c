//go:build !fencegate_unsafe_hooks

package main

// A normal build: no unsafe test hooks (see testhooks.go).

import (
	"fmt"
	"log/slog"
	"strings"

	"fencegate/gateway"
)

// checkUnsafeTestHooksEnv refuses FENCEGATE_UNSAFE_TEST_HOOKS set to
// anything but blanks: this binary has no hooks to turn on. Serve and dev
// call it with their other checks, before they start anything.
func checkUnsafeTestHooksEnv(lookupEnv lookupEnvFunc) error {
	value, ok := lookupEnv(unsafeTestHooksEnv)
	if !ok || strings.TrimSpace(value) == "" {
		return nil
	}
	return fmt.Errorf("%s is set, but this fencegate was built without the unsafe test hooks "+
		"(only test builds, with -tags %s, have them): refusing to start; unset it", unsafeTestHooksEnv, unsafeHooksBuildTag)
}

// unsafeTestHooks never returns hooks in a normal build: nil, or the
// refusal of checkUnsafeTestHooksEnv as a *usageError.
func unsafeTestHooks(lookupEnv lookupEnvFunc, _ *slog.Logger) (*gateway.TestHooks, error) {
	if err := checkUnsafeTestHooksEnv(lookupEnv); err != nil {
		return nil, &usageError{Err: err}
	}
	return nil, nil
}
