//go:build linux

package devstack

import (
	"fmt"
	"net"
	"strconv"

	"golang.org/x/sys/unix"
)

// ReservedPort is a TCP port of 127.0.0.1 held for a child process that
// binds it later, maybe many times: a server restarted after a crash
// comes back on the port its peers and clients know.
//
// [FreePort] leaves a window between picking a port and the child's bind,
// and a server that is down leaves its port free for as long: in either,
// any socket of the machine may take it, most often an outgoing
// connection, whose local port the kernel picks from the same range as
// port 0. The reservation closes both windows. It is a socket bound to the
// port with SO_REUSEPORT that never listens: the kernel gives the port to
// no listener on port 0, no outgoing connection and no bind without
// SO_REUSEPORT, while a process of the same user that binds it with
// SO_REUSEPORT (etcd's socket-reuse-port) can, and as the port's only
// listener gets every connection to it.
type ReservedPort struct {
	// Port is the reserved port.
	Port int
	fd   int
}

// ReservePorts reserves n distinct ports of 127.0.0.1. Close releases
// each.
func ReservePorts(n int) (_ []*ReservedPort, err error) {
	var reserved []*ReservedPort
	defer func() {
		if err != nil {
			for _, r := range reserved {
				r.Close()
			}
		}
	}()
	for range n {
		r, err := reservePort()
		if err != nil {
			return nil, fmt.Errorf("reserve a port: %w", err)
		}
		reserved = append(reserved, r)
	}
	return reserved, nil
}

func reservePort() (*ReservedPort, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	// Not SO_REUSEADDR: with it, any listener (Go sets it on every one)
	// could bind beside a socket that does not listen.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &ReservedPort{Port: sa.(*unix.SockaddrInet4).Port, fd: fd}, nil
}

// Addr returns 127.0.0.1:port.
func (r *ReservedPort) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.Port)) }

// Close releases the port. Closing again does nothing.
func (r *ReservedPort) Close() error {
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}
