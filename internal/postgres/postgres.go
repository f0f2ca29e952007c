//go:build linux

// Package postgres starts a real PostgreSQL server for tests: initdb into
// a fresh directory, then postgres as a child process on a free port of
// 127.0.0.1, stopped when the test finishes. It backs the tests of the SQL
// lease table as a token source (a fence column bumped on every grant).
//
// The server's binaries come from Debian's packages (`make postgres`
// installs them with apt-get): they are looked up in $FENCEGATE_PG_BIN,
// else next to initdb on the PATH, else in the newest
// /usr/lib/postgresql/*/bin. A test that cannot find them fails, saying
// how to install them; it never skips.
//
// PostgreSQL refuses to run as root: when the tests run as root, initdb
// and postgres run as the "postgres" user that the Debian package creates.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"fencegate/internal/childproc"
)

// BinEnv names the environment variable that, when set, is the directory
// of the PostgreSQL binaries (initdb, postgres).
const BinEnv = "FENCEGATE_PG_BIN"

// readyTimeout bounds initdb plus the server's start.
const readyTimeout = 60 * time.Second

// startAttempts is how many free ports are tried when the one picked is
// taken before postgres binds it.
const startAttempts = 5

// Server is a PostgreSQL server started by Start.
type Server struct {
	// URL is a connection string for the superuser "postgres" and the
	// database "postgres", such as
	// postgres://postgres@127.0.0.1:41234/postgres?sslmode=disable.
	URL string
	// Port is the TCP port on 127.0.0.1.
	Port int

	cmd    *exec.Cmd
	output *childproc.TailBuffer
	exited chan struct{}
}

// Start runs initdb into a fresh directory and starts postgres on a free
// port of 127.0.0.1 (no Unix socket, trust authentication, fsync off), and
// stops it and removes the directory when the test finishes. It fails the
// test when PostgreSQL is not installed or does not start.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := FindBin()
	if err != nil {
		tb.Fatalf("postgres: %v", err)
	}
	cred, err := childproc.Credential("postgres", "make postgres")
	if err != nil {
		tb.Fatalf("postgres: %v", err)
	}
	dir, err := os.MkdirTemp("", "fencegate-pg-")
	if err != nil {
		tb.Fatalf("postgres: %v", err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	data := filepath.Join(dir, "data")
	if err := prepareDir(dir, data, cred); err != nil {
		tb.Fatalf("postgres: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Env = childEnv()
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		tb.Fatalf("postgres: initdb: %v\n%s", err, out)
	}
	s, err := childproc.OnFreePort(startAttempts, []string{"could not bind", "already in use"}, func(port int) (*Server, error) {
		return start(ctx, bin, data, cred, port)
	})
	if err != nil {
		tb.Fatalf("postgres: %v", err)
	}
	tb.Cleanup(func() {
		s.stop()
		if tb.Failed() {
			tb.Logf("postgres output:\n%s", s.output)
		}
	})
	return s
}

// FindBin returns the directory of the PostgreSQL server's binaries, or
// an error that says how to install them.
func FindBin() (string, error) {
	has := func(dir string) bool {
		for _, name := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if dir := os.Getenv(BinEnv); dir != "" {
		if has(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("$%s=%s holds no initdb and postgres", BinEnv, dir)
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && has(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, dir := range dirs {
		if has(dir) {
			return dir, nil
		}
	}
	return "", errors.New("PostgreSQL is not installed (no initdb and postgres on the PATH, in $" + BinEnv +
		" or under /usr/lib/postgresql/*/bin): run `make postgres`, which runs apt-get install -y postgresql")
}

// version reads the major version from /usr/lib/postgresql/<version>/bin.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// prepareDir makes data, owned by the user PostgreSQL runs as, inside dir,
// which that user can enter.
func prepareDir(dir, data string, cred *syscall.Credential) error {
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(data, 0o700); err != nil {
		return err
	}
	if cred != nil {
		return os.Chown(data, int(cred.Uid), int(cred.Gid))
	}
	return nil
}

// childEnv is the environment of initdb and postgres: ours, in the C
// locale.
func childEnv() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "LC_") || strings.HasPrefix(kv, "LANG=") || strings.HasPrefix(kv, "PG")
	})
	return append(env, "LC_ALL=C", "LANG=C")
}

// start starts postgres on port and waits until it accepts
// connections.
func start(ctx context.Context, bin, data string, cred *syscall.Credential, port int) (*Server, error) {
	s := &Server{
		Port:   port,
		URL:    fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		output: &childproc.TailBuffer{},
		exited: make(chan struct{}),
	}
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=50")
	s.cmd.Env = childEnv()
	s.cmd.Stdout, s.cmd.Stderr = s.output, s.output
	// Its own process group, and killed by the kernel if the test binary
	// dies without running its cleanups.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.cmd.Path, err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	for {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			conn.Close()
			if strings.Contains(s.output.String(), "ready to accept connections") {
				return s, nil
			}
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("postgres exited before it was ready:\n%s", s.output)
		case <-ctx.Done():
			s.stop()
			return nil, fmt.Errorf("postgres not ready after %v:\n%s", readyTimeout, s.output)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop asks postgres for a fast shutdown (SIGINT), and kills it if it has
// not exited 10 seconds later.
func (s *Server) stop() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	}
}
