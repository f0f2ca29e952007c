//go:build linux

// Package zookeeper starts a real ZooKeeper server for tests: one server
// in standalone mode as a child process (a JVM), listening on a free port
// of 127.0.0.1, with its data in a fresh directory, stopped when the test
// finishes. It backs the tests of ZooKeeper's lock recipe as a token
// source (the token is the lock znode's czxid).
//
// The server comes from Debian's packages (`make zookeeper` installs
// zookeeper, which pulls a Java runtime, with apt-get): its jar is
// $FENCEGATE_ZOOKEEPER_JAR, else /usr/share/java/zookeeper.jar, whose
// manifest names the jars it needs; java is $JAVA_HOME/bin/java, else java
// on the PATH. A test that cannot find them fails, saying how to install
// them; it never skips.
package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"fencegate/internal/childproc"
)

// JarEnv names the environment variable that, when set, is the path of the
// ZooKeeper server's jar.
const JarEnv = "FENCEGATE_ZOOKEEPER_JAR"

// TickTime is the server's tick: sessions time out in whole ticks, and a
// session timeout a client asks for is held within [2, 20] ticks.
const TickTime = 200 * time.Millisecond

// readyTimeout bounds the JVM's start.
const readyTimeout = 60 * time.Second

// startAttempts is how many free ports are tried when the one picked is
// taken before the server binds it.
const startAttempts = 5

// install says how to get the server.
const install = "make zookeeper"

// Server is a ZooKeeper server started by Start.
type Server struct {
	// Addr is the client address, 127.0.0.1:PORT.
	Addr string
}

// Start starts a standalone ZooKeeper on a free port of 127.0.0.1 with its
// data in a fresh directory (no fsync, no admin server), and stops it and
// removes the directory when the test finishes. It fails the test when
// ZooKeeper or Java is not installed or the server does not start.
func Start(tb testing.TB) *Server {
	tb.Helper()
	java, classPath, err := FindBin()
	if err != nil {
		tb.Fatalf("zookeeper: %v", err)
	}
	dir := childproc.TempDir(tb, "fencegate-zookeeper-")
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	s, err := childproc.OnFreePort(startAttempts, []string{"Address already in use"}, func(port int) (*Server, error) {
		return start(ctx, tb, java, classPath, filepath.Join(dir, strconv.Itoa(port)), port)
	})
	if err != nil {
		tb.Fatalf("zookeeper: %v", err)
	}
	return s
}

// start starts the server on port with its configuration and data under
// dir, and waits until it answers as a standalone server.
func start(ctx context.Context, tb testing.TB, java, classPath, dir string, port int) (*Server, error) {
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "zoo.cfg")
	err := os.WriteFile(config, fmt.Appendf(nil, `tickTime=%d
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
maxClientCnxns=0
forceSync=no
admin.enableServer=false
4lw.commands.whitelist=srvr
`, TickTime.Milliseconds(), data, port), 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(java, "-Xmx128m", "-XX:+UseSerialGC", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", classPath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", config)
	cmd.Dir = dir
	p, err := childproc.Start(tb, "zookeeper", cmd)
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	if err := p.WaitReady(ctx, func() bool { return strings.Contains(srvr(s.Addr), "Mode: standalone") }); err != nil {
		p.Stop()
		return nil, err
	}
	return s, nil
}

// srvr sends the four-letter command "srvr" and returns the answer, or ""
// when the server does not answer.
func srvr(addr string) string {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(conn, "srvr"); err != nil {
		return ""
	}
	b, _ := io.ReadAll(conn)
	return string(b)
}

// FindBin returns the path of java and the class path of the server (its
// jar, and the jar of slf4j's simple logger when Debian has it, so that
// the server's warnings reach the test's log), or an error that says how
// to install them.
func FindBin() (java, classPath string, err error) {
	jar := os.Getenv(JarEnv)
	if jar == "" {
		jar = "/usr/share/java/zookeeper.jar"
	}
	if _, err := os.Stat(jar); err != nil {
		return "", "", errors.New("ZooKeeper is not installed (no " + jar + "; $" + JarEnv +
			" may name the server's jar): run `" + install + "`, which runs apt-get install -y zookeeper")
	}
	java = "java"
	if home := os.Getenv("JAVA_HOME"); home != "" {
		java = filepath.Join(home, "bin", "java")
	}
	if java, err = exec.LookPath(java); err != nil {
		return "", "", fmt.Errorf("no Java runtime (%w): run `%s`, whose apt-get install -y zookeeper pulls one", err, install)
	}
	classPath = jar
	if logger := "/usr/share/java/slf4j-simple.jar"; fileExists(logger) {
		classPath += string(os.PathListSeparator) + logger
	}
	return java, classPath, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
