package main

import (
	"fmt"
	"io"

	"fencegate/internal/config"
)

// lookupEnvFunc is os.LookupEnv, or a map in tests.
type lookupEnvFunc = config.LookupEnv

// usageError is a mistake in the command line, the environment or the
// config file: main exits 2 for it.
type usageError = config.UsageError

// usageErrorf returns a *usageError.
func usageErrorf(format string, args ...any) error {
	return &usageError{Err: fmt.Errorf(format, args...)}
}

// parseServe reads serve's flags, environment and config file; the
// unsafe test hooks' variable is checked with them.
func parseServe(args []string, lookupEnv lookupEnvFunc, stdout io.Writer) (config.Serve, error) {
	return config.ParseServe(args, lookupEnv, stdout, checkUnsafeTestHooksEnv(lookupEnv))
}

// parseDev is parseServe for dev.
func parseDev(args []string, lookupEnv lookupEnvFunc, stdout io.Writer) (config.Dev, error) {
	return config.ParseDev(args, lookupEnv, stdout, checkUnsafeTestHooksEnv(lookupEnv))
}
