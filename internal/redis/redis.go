//go:build linux

// Package redis starts a real Redis server for tests: redis-server as a
// child process on a free port of 127.0.0.1, without persistence, with
// its working directory in a fresh directory, stopped when the test
// finishes. It backs the tests that show why a Redis lock's value is not a
// fencing token.
//
// The server comes from Debian's packages (`make redis` installs
// redis-server with apt-get): redis-server is looked up in
// $FENCEGATE_REDIS_SERVER, else on the PATH, else in /usr/bin. A test that
// cannot find it fails, saying how to install it; it never skips.
package redis

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"fencegate/internal/childproc"
)

// ServerEnv names the environment variable that, when set, is the path of
// redis-server.
const ServerEnv = "FENCEGATE_REDIS_SERVER"

// readyTimeout bounds the server's start.
const readyTimeout = 30 * time.Second

// startAttempts is how many free ports are tried when the one picked is
// taken before the server binds it.
const startAttempts = 5

// install says how to get the server.
const install = "make redis"

// Server is a Redis server started by Start.
type Server struct {
	// Addr is the server's address, 127.0.0.1:PORT.
	Addr string
}

// Start starts redis-server on a free port of 127.0.0.1 (no RDB snapshots,
// no append-only file, no Unix socket), and stops it and removes its
// directory when the test finishes. It fails the test when Redis is not
// installed or does not start.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := FindBin()
	if err != nil {
		tb.Fatalf("redis: %v", err)
	}
	dir := childproc.TempDir(tb, "fencegate-redis-")
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	s, err := childproc.OnFreePort(startAttempts, []string{"in use"}, func(port int) (*Server, error) {
		cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning")
		cmd.Dir = dir
		p, err := childproc.Start(tb, "redis-server", cmd)
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
		if err := p.WaitReady(ctx, func() bool { return ping(s.Addr) }); err != nil {
			p.Stop()
			return nil, err
		}
		return s, nil
	})
	if err != nil {
		tb.Fatalf("redis: %v", err)
	}
	return s
}

// ping reports whether the server at addr answers PING with PONG.
func ping(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}

// FindBin returns the path of redis-server, or an error that says how to
// install it.
func FindBin() (string, error) {
	if p := os.Getenv(ServerEnv); p != "" {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("$%s=%s is not an executable (unset it to use Debian's, which `%s` installs)", ServerEnv, p, install)
		}
		return p, nil
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if p := filepath.Join("/usr/bin", "redis-server"); fileExecutable(p) {
		return p, nil
	}
	return "", errors.New("redis-server is not installed (not on the PATH, in $" + ServerEnv +
		" or /usr/bin): run `" + install + "`, which runs apt-get install -y redis-server")
}

func fileExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
