package devstack

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"syscall"
)

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago: it
// listens on port 0 and closes the listener. Another process may take the
// port before the caller binds it, so callers that can retry on a new port
// should.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	return port, nil
}

// portOrFree returns port, or a free port when port is zero.
func portOrFree(port int) (int, error) {
	if port < 0 || port > 65535 {
		return 0, fmt.Errorf("port %d out of range", port)
	}
	if port != 0 {
		return port, nil
	}
	return FreePort()
}

// ErrAddrInUse says that a server could not listen because its port was
// taken. [StartEtcd] and [StartVersityGW] wrap it, so that callers that
// asked for fixed ports can tell this failure apart and retry.
var ErrAddrInUse = errors.New("address already in use")

// isAddrInUse reports whether err says that a listen address is taken.
// Servers do not always wrap the syscall error, so the text is checked too.
func isAddrInUse(err error) bool {
	return err != nil && (errors.Is(err, ErrAddrInUse) || errors.Is(err, syscall.EADDRINUSE) ||
		strings.Contains(err.Error(), "address already in use"))
}

// localURL returns http://127.0.0.1:port.
func localURL(port int) url.URL {
	return url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
}
