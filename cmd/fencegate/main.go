// Command fencegate is the fencing-token gateway: `fencegate serve` (the
// default) serves the HTTP API in front of S3 with high-water marks in
// etcd, `fencegate dev` runs a local etcd, a local S3 server (versitygw)
// and a gateway in front of them, `fencegate config check FILE` checks a
// config file, `fencegate auth hash-key` hashes an API key for one, and
// `fencegate version` prints build information. `fencegate help` and
// `fencegate <command> -h` describe the flags, each of which falls back to
// a FENCEGATE_* environment variable, then to the --config file.
//
// This package wires the packages together and runs the commands;
// internal/config, which only it imports, reads the flags, the
// environment and the config file into their typed, validated configs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, a second one kills the process.
		<-ctx.Done()
		stop()
	}()
	setGCPercent(os.LookupEnv)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, new(*usageError)):
		fmt.Fprintf(os.Stderr, "fencegate: %v\n", err)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "fencegate: %v\n", err)
		os.Exit(1)
	}
}

const topUsage = `fencegate is a gateway that enforces fencing tokens in front of S3.

Usage:
  fencegate [serve] [flags]    serve the HTTP API (the default command)
  fencegate dev [flags]        run a local etcd, S3 server and gateway, for trying fencegate out
  fencegate config check FILE  check a config file (for --config) and exit
  fencegate auth hash-key      read an API key on stdin, print its hash for the config file
  fencegate version            print build information
  fencegate help               print this help

Run fencegate <command> -h for a command's flags.
`

// run runs the command in args (without the program name) until it is done
// or ctx is cancelled, which shuts servers down gracefully. It returns
// flag.ErrHelp after printing help, and a *usageError for mistakes in the
// command line or environment.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runEnv(ctx, args, os.LookupEnv, stdout, stderr)
}

// runEnv is run with the environment given by lookupEnv.
func runEnv(ctx context.Context, args []string, lookupEnv lookupEnvFunc, stdout, stderr io.Writer) error {
	name, rest := "serve", args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, rest = args[0], args[1:]
	}
	switch name {
	case "serve":
		return runServe(ctx, rest, lookupEnv, stdout, stderr)
	case "dev":
		return runDev(ctx, rest, lookupEnv, stdout, stderr)
	case "config":
		return runConfig(rest, lookupEnv, stdout)
	case "auth":
		return runAuth(rest, os.Stdin, stdout)
	case "version":
		return runVersion(rest, stdout)
	case "help":
		fmt.Fprint(stdout, topUsage)
		return nil
	default:
		return usageErrorf("unknown command %q (see fencegate help)", name)
	}
}
