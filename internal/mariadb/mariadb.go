//go:build linux

// Package mariadb starts a real MariaDB server for tests: mariadb-install-db
// into a fresh directory, then mariadbd as a child process listening only
// on a Unix socket in that directory, stopped when the test finishes. It
// backs the tests of the MySQL lease table as a token source (a fence
// column bumped with LAST_INSERT_ID(fence + 1) on every grant).
//
// The server comes from Debian's packages (`make mariadb` installs
// mariadb-server with apt-get): mariadbd and mariadb-install-db are looked
// up in $FENCEGATE_MARIADB_BIN, else on the PATH, else in /usr/sbin and
// /usr/bin. A test that cannot find them fails, saying how to install
// them; it never skips.
//
// mariadbd will not run as root unless told to: when the tests run as root,
// both programs run as the "mysql" user that the Debian package creates.
package mariadb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"fencegate/internal/childproc"
)

// BinEnv names the environment variable that, when set, is the directory
// holding mariadbd and mariadb-install-db.
const BinEnv = "FENCEGATE_MARIADB_BIN"

// Database is the empty database that Start creates for the test.
const Database = "fencegate"

// readyTimeout bounds mariadb-install-db plus the server's start.
const readyTimeout = 90 * time.Second

// install says how to get the server.
const install = "make mariadb"

// Server is a MariaDB server started by Start.
type Server struct {
	// Socket is the path of the server's Unix socket.
	Socket string
	// DSN is a go-sql-driver/mysql data source name for the user root
	// (no password) and the database Database, over Socket, such as
	// root@unix(/tmp/fencegate-mariadb-1/run/mysqld.sock)/fencegate.
	DSN string
}

// Start runs mariadb-install-db into a fresh directory and starts mariadbd
// on a Unix socket there (no TCP, no binary log, the redo log flushed
// lazily), creates the database Database, and stops the server and removes
// the directory when the test finishes. It fails the test when MariaDB is
// not installed or does not start.
func Start(tb testing.TB) *Server {
	tb.Helper()
	mariadbd, installDB, err := FindBin()
	if err != nil {
		tb.Fatalf("mariadb: %v", err)
	}
	cred, err := childproc.Credential("mysql", install)
	if err != nil {
		tb.Fatalf("mariadb: %v", err)
	}
	dir := childproc.TempDir(tb, "fencegate-mariadb-")
	data, run := filepath.Join(dir, "data"), filepath.Join(dir, "run")
	for _, d := range []string{data, run} {
		if err := childproc.MkdirFor(d, 0o755, cred); err != nil {
			tb.Fatalf("mariadb: %v", err)
		}
	}
	initFile := filepath.Join(run, "init.sql")
	if err := os.WriteFile(initFile, []byte("CREATE DATABASE IF NOT EXISTS "+Database+";\n"), 0o644); err != nil {
		tb.Fatalf("mariadb: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	installCmd := exec.CommandContext(ctx, installDB, "--no-defaults", "--datadir="+data,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve")
	installCmd.Dir = run
	installCmd.Env = childEnv()
	installCmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := installCmd.CombinedOutput(); err != nil {
		tb.Fatalf("mariadb: mariadb-install-db: %v\n%s", err, out)
	}
	s := &Server{Socket: filepath.Join(run, "mysqld.sock")}
	s.DSN = "root@unix(" + s.Socket + ")/" + Database
	cmd := exec.Command(mariadbd, "--no-defaults",
		"--datadir="+data, "--socket="+s.Socket, "--skip-networking",
		"--pid-file="+filepath.Join(run, "mariadbd.pid"), "--tmpdir="+run,
		"--init-file="+initFile, "--skip-log-bin",
		"--innodb-flush-log-at-trx-commit=0", "--innodb-buffer-pool-size=16M", "--max-connections=50")
	cmd.Dir = run
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	p, err := childproc.Start(tb, "mariadbd", cmd)
	if err != nil {
		tb.Fatalf("mariadb: %v", err)
	}
	err = p.WaitReady(ctx, func() bool {
		if !strings.Contains(p.Output.String(), "ready for connections") {
			return false
		}
		conn, err := net.DialTimeout("unix", s.Socket, time.Second)
		if err != nil {
			return false
		}
		conn.Close()
		return true
	})
	if err != nil {
		tb.Fatalf("mariadb: %v", err)
	}
	return s
}

// FindBin returns the paths of mariadbd and mariadb-install-db, or an
// error that says how to install them.
func FindBin() (mariadbd, installDB string, err error) {
	executable := func(path string) bool {
		fi, err := os.Stat(path)
		return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
	}
	if dir := os.Getenv(BinEnv); dir != "" {
		mariadbd, installDB = filepath.Join(dir, "mariadbd"), filepath.Join(dir, "mariadb-install-db")
		if executable(mariadbd) && executable(installDB) {
			return mariadbd, installDB, nil
		}
		return "", "", fmt.Errorf("$%s=%s holds no mariadbd and mariadb-install-db (unset it to use Debian's, which `%s` installs)", BinEnv, dir, install)
	}
	find := func(name string) string {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		for _, dir := range []string{"/usr/sbin", "/usr/bin"} {
			if p := filepath.Join(dir, name); executable(p) {
				return p
			}
		}
		return ""
	}
	mariadbd, installDB = find("mariadbd"), find("mariadb-install-db")
	if mariadbd == "" || installDB == "" {
		return "", "", errors.New("MariaDB is not installed (no mariadbd and mariadb-install-db on the PATH, in $" + BinEnv +
			", /usr/sbin or /usr/bin): run `" + install + "`, which runs apt-get install -y mariadb-server")
	}
	return mariadbd, installDB, nil
}

// childEnv is the environment of the server's programs: ours, in the C
// locale, without the MYSQL_ variables that would point them elsewhere.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "LC_") || strings.HasPrefix(kv, "LANG=") || strings.HasPrefix(kv, "MYSQL_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C", "LANG=C")
}
