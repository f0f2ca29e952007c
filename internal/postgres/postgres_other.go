//go:build !linux

package postgres

import (
	"errors"
	"testing"
)

// Server is a PostgreSQL server started by Start.
type Server struct {
	URL  string
	Port int
}

// Start fails the test: the helper runs PostgreSQL as a child process with
// Linux process controls only.
func Start(tb testing.TB) *Server {
	tb.Helper()
	tb.Fatal("postgres: the PostgreSQL test helper runs on Linux only")
	return nil
}

// BinEnv names the environment variable that, when set, is the directory
// of the PostgreSQL binaries (initdb, postgres).
const BinEnv = "FENCEGATE_PG_BIN"

// FindBin fails outside Linux.
func FindBin() (string, error) {
	return "", errors.New("postgres: the PostgreSQL test helper runs on Linux only")
}
