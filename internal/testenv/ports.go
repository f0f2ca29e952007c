package testenv

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
)

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago. It
// listens on port 0 and closes the listener, so another process may take
// the port before the caller binds it: callers retry on [isAddrInUse].
func freePort() (int, error) {
	var lastErr error
	for range 5 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			lastErr = err
			continue
		}
		port := l.Addr().(*net.TCPAddr).Port
		if err := l.Close(); err != nil {
			lastErr = err
			continue
		}
		return port, nil
	}
	return 0, fmt.Errorf("free port: %w", lastErr)
}

// isAddrInUse reports whether err says that a listen address is taken.
// Servers do not always wrap the syscall error, so the text is checked too.
func isAddrInUse(err error) bool {
	return err != nil && (errors.Is(err, syscall.EADDRINUSE) ||
		strings.Contains(err.Error(), "address already in use"))
}
