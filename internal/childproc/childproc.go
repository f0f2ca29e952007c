//go:build linux

// Package childproc runs a test's server as a child process: in its own
// process group, killed by the kernel if the test binary dies without
// running its cleanups, as another user when the server refuses root, and
// with the tail of its output kept for the test's log. It backs the
// packages that start a real MariaDB, ZooKeeper or Redis for the tests of
// the token sources.
package childproc

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a server started by Start.
type Process struct {
	// Output holds the last 64 KiB the process wrote to stdout and stderr.
	Output *TailBuffer

	name   string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts cmd (whose Env, Dir and Credential the caller has set) in
// its own process group and returns at once. When the test finishes it
// stops the process (SIGTERM, then SIGKILL 10 seconds later) and, if the
// test failed, logs its output under name.
func Start(tb testing.TB, name string, cmd *exec.Cmd) (*Process, error) {
	tb.Helper()
	p := &Process{Output: &TailBuffer{}, name: name, cmd: cmd, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Output, p.Output
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	tb.Cleanup(func() {
		p.Stop()
		if tb.Failed() {
			tb.Logf("%s output:\n%s", name, p.Output)
		}
	})
	return p, nil
}

// WaitReady calls ready every 50 ms until it returns true, and fails if
// the process exits first or ctx ends.
func (p *Process) WaitReady(ctx context.Context, ready func() bool) error {
	for {
		if ready() {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before it was ready:\n%s", p.name, p.Output)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w:\n%s", p.name, context.Cause(ctx), p.Output)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Stop sends SIGTERM to the process group, and SIGKILL if the process has
// not exited 10 seconds later. It is safe to call more than once.
func (p *Process) Stop() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// Credential returns whom to run a server as that refuses root: nil
// (ourselves) unless we are root, else the user name, which its Debian
// package creates (install says how to get it, such as "make mariadb").
func Credential(name, install string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("running as root, the server must run as another user, and there is no user %q (its Debian package creates it: %s): %w", name, install, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %s: uid %q gid %q", name, u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// MkdirFor makes the directory path with mode, owned by cred's user when
// cred is not nil.
func MkdirFor(path string, mode os.FileMode, cred *syscall.Credential) error {
	if err := os.Mkdir(path, mode); err != nil {
		return err
	}
	if cred != nil {
		return os.Chown(path, int(cred.Uid), int(cred.Gid))
	}
	return nil
}

// TempDir makes a directory that the test removes when it finishes and
// that every user can enter (a server running as another user keeps its
// files in a subdirectory made with MkdirFor).
func TempDir(tb testing.TB, pattern string) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// TailBuffer keeps the last 64 KiB written to it; safe for concurrent use.
type TailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *TailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - 64<<10; over > 0 {
		b.buf = b.buf[over:]
	}
	return len(p), nil
}

// String returns what the buffer holds.
func (b *TailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// OnFreePort runs start with a free TCP port of 127.0.0.1 and returns what
// it returns. A port can be taken between its pick and the server's bind:
// when start's error contains one of inUse (the server's words for it),
// it runs start again on a new port, attempts times in all.
func OnFreePort[T any](attempts int, inUse []string, start func(port int) (T, error)) (T, error) {
	var zero T
	var err error
	for range attempts {
		var port int
		if port, err = FreePort(); err != nil {
			return zero, err
		}
		var v T
		if v, err = start(port); err == nil {
			return v, nil
		}
		if !slices.ContainsFunc(inUse, func(s string) bool { return strings.Contains(err.Error(), s) }) {
			break
		}
	}
	return zero, err
}
