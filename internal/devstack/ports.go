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
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts returns n distinct TCP ports of 127.0.0.1 that were free a
// moment ago. It holds every listener open until all n are picked, so the
// kernel cannot hand out the same port twice, as n calls to [FreePort]
// can.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// fillFreePorts sets every port that is zero to a free port, all of them
// distinct, and checks that the others are in range.
func fillFreePorts(ports ...*int) error {
	var zero []*int
	for _, p := range ports {
		switch {
		case *p < 0 || *p > 65535:
			return fmt.Errorf("port %d out of range", *p)
		case *p == 0:
			zero = append(zero, p)
		}
	}
	free, err := FreePorts(len(zero))
	if err != nil {
		return err
	}
	for i, p := range zero {
		*p = free[i]
	}
	return nil
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
