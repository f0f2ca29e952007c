package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"fencegate/api"
	"fencegate/api/client"
)

// cleanupTimeout bounds the release of the lock after the command.
const cleanupTimeout = 5 * time.Second

// lock is `fencectl lock [flags] NAME -- CMD [ARGS...]`: it creates a
// session (kept alive in the background), waits for the lock, runs the
// command with the token in FENCE_TOKEN, and releases the lock when the
// command exits. If the session is lost while the command runs, the
// command's process group gets SIGTERM, then SIGKILL after --kill-after,
// and fencectl exits 124. SIGINT, SIGTERM and SIGHUP sent to fencectl are
// passed on to the command.
//
// The command runs in a process group of its own, so that all it starts
// can be stopped; like timeout(1), it therefore cannot read from the
// terminal.
func (c *cli) lock(ctx context.Context, args []string) int {
	fs := newFlagSet("lock")
	ttl := fs.Duration("ttl", 10*time.Second, "the session's TTL (whole seconds)")
	wait := fs.Duration("wait", 0, "how long to wait for the lock (0: as long as it takes)")
	killAfter := fs.Duration("kill-after", 10*time.Second, "after SIGTERM on a lost lock, how long before SIGKILL")
	var pos, command []string
	if i := slices.Index(args, "--"); i >= 0 {
		var err error
		if pos, err = parseArgs(fs, args[:i]); err != nil {
			return usageError(c.stderr, fmt.Errorf("lock: %w", err))
		}
		command = args[i+1:]
	} else {
		if err := fs.Parse(args); err != nil {
			return usageError(c.stderr, fmt.Errorf("lock: %w", err))
		}
		if fs.NArg() > 0 {
			pos, command = fs.Args()[:1], fs.Args()[1:]
		}
	}
	switch {
	case len(pos) != 1:
		return usageError(c.stderr, errors.New("lock: want NAME -- CMD [ARGS...]"))
	case len(command) == 0:
		return usageError(c.stderr, errors.New("lock: no command to run (lock NAME -- CMD [ARGS...])"))
	case *ttl < time.Second || *ttl > api.MaxSessionTTL*time.Second:
		return usageError(c.stderr, fmt.Errorf("lock: --ttl %v: want 1s to %v", *ttl, api.MaxSessionTTL*time.Second))
	case *wait < 0:
		return usageError(c.stderr, fmt.Errorf("lock: --wait %v: must not be negative", *wait))
	case *killAfter <= 0:
		return usageError(c.stderr, fmt.Errorf("lock: --kill-after %v: must be above zero", *killAfter))
	}
	name := pos[0]
	if err := api.ValidateLockName(name); err != nil {
		return usageError(c.stderr, fmt.Errorf("lock: %w", err))
	}
	path, err := exec.LookPath(command[0])
	if err != nil {
		fmt.Fprintf(c.stderr, "fencectl: lock: %v\n", err)
		return exitNoCommand
	}

	session, err := c.client.NewSession(ctx, *ttl)
	if err != nil {
		return c.fail(fmt.Errorf("lock %s: %w", name, err))
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = session.Close(cctx) // releases the lock; if it fails, the session expires
	}()
	lockCtx, cancelLock := ctx, context.CancelFunc(func() {})
	if *wait > 0 {
		lockCtx, cancelLock = context.WithTimeout(ctx, *wait)
	}
	lock, err := session.Lock(lockCtx, name)
	cancelLock()
	if err != nil {
		if ctx.Err() == nil && (errors.Is(err, api.ErrLockTimeout) || errors.Is(err, context.DeadlineExceeded)) {
			fmt.Fprintf(c.stderr, "fencectl: lock %s: not acquired within %v\n", name, *wait)
			return exitNotLocked
		}
		return c.fail(fmt.Errorf("lock %s: %w", name, err))
	}
	c.event("acquired", name, lock.Token, session.ID(), fmt.Sprintf("lock %s acquired with token %d", name, lock.Token))

	cmd := exec.Command(path, command[1:]...)
	cmd.Env = append(slices.Clone(c.environ),
		"FENCE_TOKEN="+lock.Token.String(),
		"FENCE_LOCK="+name,
		"FENCE_SESSION="+session.ID().String(),
		"FENCEGATE_URL="+c.url,
	)
	if c.apiKey != "" { // a key from --api-key reaches the command's own fencectl calls
		cmd.Env = append(cmd.Env, "FENCEGATE_API_KEY="+c.apiKey)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.stdin, c.stdout, c.stderr
	isolate(cmd)
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(signals)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(c.stderr, "fencectl: lock %s: %v\n", name, err)
		return exitCannotRun
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		select {
		case err := <-exited:
			if lost := session.Err(); errors.Is(lost, client.ErrSessionLost) {
				c.event("lost", name, lock.Token, session.ID(), fmt.Sprintf("lock %s was lost while the command ran: %v", name, lost))
				return exitLockLost
			}
			c.event("released", name, lock.Token, session.ID(), fmt.Sprintf("lock %s released", name))
			return exitStatus(err)
		case sig := <-signals:
			if s, ok := sig.(syscall.Signal); ok {
				signalGroup(cmd, s)
			}
		case <-session.Done():
			c.event("lost", name, lock.Token, session.ID(), fmt.Sprintf("lock %s lost (%v): stopping the command", name, session.Err()))
			signalGroup(cmd, syscall.SIGTERM)
			timer := time.NewTimer(*killAfter)
			select {
			case <-exited:
				timer.Stop()
			case <-timer.C:
				signalGroup(cmd, syscall.SIGKILL)
				<-exited
			}
			return exitLockLost
		}
	}
}

// event reports a step of `fencectl lock` on standard error: the text, or
// with --json one JSON object.
func (c *cli) event(what, lock string, token api.Token, session api.SessionID, text string) {
	if c.json {
		_ = json.NewEncoder(c.stderr).Encode(map[string]any{"event": what, "lock": lock, "token": token, "session": session})
		return
	}
	fmt.Fprintf(c.stderr, "fencectl: %s\n", text)
}

// exitStatus is the exit code for a command's end: its status, or 128+N
// when signal N ended it.
func exitStatus(err error) int {
	if err == nil {
		return exitOK
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return exit.ExitCode()
	}
	return exitFailure
}
