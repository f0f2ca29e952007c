// Command fencectl is fencegate's command-line client: it runs a command
// while holding a fencegate lock (`fencectl lock NAME -- CMD ARGS`, like
// `etcdctl lock` with a command, the token in FENCE_TOKEN), and writes,
// reads and inspects fenced objects, high-water marks and locks.
//
// It finds the gateway from --url, else FENCEGATE_URL, else
// http://127.0.0.1:8080 (where `make run` listens). For a gateway that
// authenticates API keys, it sends FENCEGATE_API_KEY (or --api-key, which
// other users of the machine can see in the process list) as a bearer key.
// Output is for people by default and JSON with --json. Exit codes:
//
//	0    success
//	1    failure: the gateway unreachable, a 5xx answer, an I/O error
//	2    a mistake on the command line
//	3    the gateway refused the request (a 4xx problem: stale token, lock
//	     not held, implausible or malformed token, ...)
//	4    not found (get of an absent object)
//	5    lock: not acquired within --wait
//	124  lock: the lock was lost while the command ran; the command was
//	     stopped (SIGTERM, then SIGKILL after --kill-after)
//	126  lock: the command could not be run
//	127  lock: the command was not found
//
// Otherwise `fencectl lock` exits with the command's status (128+N when a
// signal N ended it).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"fencegate/api"
	"fencegate/api/client"
)

// Exit codes (see the package documentation).
const (
	exitOK        = 0
	exitFailure   = 1
	exitUsage     = 2
	exitRefused   = 3
	exitNotFound  = 4
	exitNotLocked = 5
	exitLockLost  = 124
	exitCannotRun = 126
	exitNoCommand = 127
)

// defaultURL is where `make run` serves the gateway.
const defaultURL = "http://127.0.0.1:8080"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `fencectl is the command-line client of fencegate, the fencing-token gateway.

Usage:
  fencectl [global flags] lock [--ttl 10s] [--wait 0] [--kill-after 10s] NAME -- CMD [ARGS...]
      run CMD while holding the lock NAME; CMD sees FENCE_TOKEN (the lock's
      fencing token), FENCE_LOCK, FENCE_SESSION, FENCEGATE_URL and, with a
      key, FENCEGATE_API_KEY
  fencectl [global flags] put [--ticket] BUCKET/KEY FILE [--token N]
      write FILE ("-": standard input) with the fencing token N
      (default: $FENCE_TOKEN); --ticket sends the bytes straight to the
      store on a ticket (POST /v1/tickets), not through the gateway
  fencectl [global flags] get BUCKET/KEY [-o FILE]
      read an object to standard output (or FILE)
  fencectl [global flags] delete BUCKET/KEY [--token N]
      delete an object with the fencing token N (default: $FENCE_TOKEN)
  fencectl [global flags] hwm RESOURCE
      print a resource's high-water mark, such as hwm s3/dev/greeting
  fencectl [global flags] locks NAME
      print whether a lock is held, and how many wait for it
  fencectl [global flags] watch [--prefix P] [--count N] [--since ID]
      print the gateway's decisions (writes accepted and refused, locks,
      partner requests) under the resource prefix P: those it holds (after
      the event ID), then as they happen; a dropped connection is resumed
      after the last decision printed

Global flags:
  --url URL       the gateway (default: $FENCEGATE_URL, else ` + defaultURL + `)
  --api-key KEY   the bearer API key, for gateways with authentication
                  (default: $FENCEGATE_API_KEY, which is safer: flags are
                  visible to other users in the process list)
  --json          print JSON instead of text

Exit codes: 0 ok, 1 failure, 2 usage, 3 refused by the gateway, 4 not found,
5 lock not acquired within --wait, 124 lock lost (the command was stopped),
126 command not runnable, 127 command not found; else the command's status.
`

// cli is one run of fencectl: the parsed global flags and where to write.
type cli struct {
	client  *client.Client
	url     string
	apiKey  string // "" sends none
	json    bool
	environ []string
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
}

// run runs fencectl with args (without the program name) and the
// environment environ (as os.Environ), and returns the exit code.
func run(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fencectl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	baseURL := fs.String("url", "", "")
	apiKey := fs.String("api-key", "", "")
	jsonOut := fs.Bool("json", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return exitOK
		}
		return usageError(stderr, err)
	}
	c := &cli{json: *jsonOut, environ: environ, stdin: stdin, stdout: stdout, stderr: stderr}
	c.url = *baseURL
	if c.url == "" {
		c.url = getenv(environ, "FENCEGATE_URL")
	}
	if c.url == "" {
		c.url = defaultURL
	}
	if u, err := url.Parse(c.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError(stderr, fmt.Errorf("--url %q: want a URL such as %s", c.url, defaultURL))
	}
	c.apiKey = *apiKey
	if c.apiKey == "" {
		c.apiKey = getenv(environ, "FENCEGATE_API_KEY")
	}
	c.client = &client.Client{BaseURL: c.url, APIKey: c.apiKey}
	if fs.NArg() == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	command, rest := fs.Arg(0), fs.Args()[1:]
	switch command {
	case "lock":
		return c.lock(ctx, rest)
	case "put":
		return c.put(ctx, rest)
	case "get":
		return c.get(ctx, rest)
	case "delete":
		return c.delete(ctx, rest)
	case "hwm":
		return c.hwm(ctx, rest)
	case "locks":
		return c.locks(ctx, rest)
	case "watch":
		return c.watch(ctx, rest)
	case "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	return usageError(stderr, fmt.Errorf("unknown command %q", command))
}

// usageError reports a command-line mistake and returns exitUsage; for
// -h, it prints the usage and returns exitOK.
func usageError(stderr io.Writer, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stderr, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "fencectl: %v (see fencectl --help)\n", err)
	return exitUsage
}

// newFlagSet returns a subcommand's flag set, which reports errors only
// through its return values.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// getenv reads name from environ.
func getenv(environ []string, name string) string {
	for i := len(environ) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(environ[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// parseArgs parses fs's flags wherever they are among args (as in
// `put BUCKET/KEY FILE --token 5`) and returns the other arguments. A "--"
// ends the flags.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// fail reports err and returns its exit code: exitRefused for a 4xx
// problem of the gateway, exitNotFound for api.ErrNotFound, exitFailure
// for the rest.
func (c *cli) fail(err error) int {
	code := exitFailure
	var e *client.Error
	switch {
	case errors.Is(err, api.ErrNotFound):
		code = exitNotFound
	case errors.As(err, &e) && e.Problem.Status >= 400 && e.Problem.Status < 500:
		code = exitRefused
	}
	if c.json {
		out := map[string]any{"error": err.Error(), "exit_code": code}
		if e != nil {
			out["problem"] = e.Problem
		}
		_ = json.NewEncoder(c.stderr).Encode(out)
	} else {
		fmt.Fprintf(c.stderr, "fencectl: %v\n", err)
	}
	return code
}

// print writes v as JSON with --json, else the text.
func (c *cli) print(v any, text string) int {
	if c.json {
		if err := json.NewEncoder(c.stdout).Encode(v); err != nil {
			return c.fail(err)
		}
		return exitOK
	}
	if _, err := fmt.Fprintln(c.stdout, text); err != nil {
		return c.fail(err)
	}
	return exitOK
}

// tokenFlag is a --token flag whose default comes from FENCE_TOKEN.
func (c *cli) tokenFlag(fs *flag.FlagSet) *string {
	return fs.String("token", getenv(c.environ, "FENCE_TOKEN"), "")
}

// parseToken parses the --token value.
func parseToken(s string) (api.Token, error) {
	if s == "" {
		return 0, errors.New("--token is required (or FENCE_TOKEN in the environment)")
	}
	t, err := api.ParseToken(s)
	if err != nil {
		return 0, fmt.Errorf("--token %q: %w", s, err)
	}
	return t, nil
}

// splitObject splits BUCKET/KEY.
func splitObject(s string) (bucket, key string, err error) {
	bucket, key, ok := strings.Cut(s, "/")
	if !ok || bucket == "" || key == "" {
		return "", "", fmt.Errorf("%q: want BUCKET/KEY", s)
	}
	return bucket, key, nil
}
