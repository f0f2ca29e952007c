package devstack_test

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"fencegate/internal/devstack"
)

// TestReservedPort shows what a reservation holds off and what it lets
// in: no socket of the machine takes the port but one that binds it with
// SO_REUSEPORT (the child it is held for), which then gets every
// connection, and can do so again after it stops; once released, the
// port is anyone's.
func TestReservedPort(t *testing.T) {
	ports, err := devstack.ReservePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p.Port] || p.Port == 0 {
			t.Fatalf("ports %v: want distinct, nonzero", ports)
		}
		seen[p.Port] = true
	}
	r := ports[0]
	for _, p := range ports[1:] {
		p.Close()
	}
	defer r.Close()
	elsewhere, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer elsewhere.Close()

	intruders := []struct {
		name string
		take func() (io.Closer, error)
	}{
		{"a listener", func() (io.Closer, error) { return net.Listen("tcp", r.Addr()) }},
		{"a listener without SO_REUSEADDR", func() (io.Closer, error) {
			lc := net.ListenConfig{Control: setSockopt(unix.SO_REUSEADDR, 0)}
			return lc.Listen(context.Background(), "tcp", r.Addr())
		}},
		{"an outgoing connection from the port", func() (io.Closer, error) {
			local, err := net.ResolveTCPAddr("tcp", r.Addr())
			if err != nil {
				return nil, err
			}
			d := net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}
			return d.Dial("tcp", elsewhere.Addr().String())
		}},
	}
	for _, in := range intruders {
		c, err := in.take()
		if err == nil {
			c.Close()
			t.Errorf("%s took reserved port %d", in.name, r.Port)
		} else if !errors.Is(err, syscall.EADDRINUSE) {
			t.Errorf("%s: %v, want EADDRINUSE", in.name, err)
		}
	}

	// The child, twice: as after a crash and a restart.
	for start := 1; start <= 2; start++ {
		lc := net.ListenConfig{Control: setSockopt(unix.SO_REUSEPORT, 1)}
		l, err := lc.Listen(context.Background(), "tcp", r.Addr())
		if err != nil {
			t.Fatalf("start %d: listen with SO_REUSEPORT on the reserved port: %v", start, err)
		}
		const conns = 20 // a second listener would get some of them
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte{'!'})
				c.Close()
			}
		}()
		for i := range conns {
			c, err := net.DialTimeout("tcp", r.Addr(), 5*time.Second)
			if err != nil {
				t.Fatalf("start %d: connection %d: %v", start, i, err)
			}
			b := make([]byte, 1)
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(c, b); err != nil {
				t.Fatalf("start %d: connection %d not served by the child: %v", start, i, err)
			}
			c.Close()
		}
		l.Close()
	}

	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	l, err := net.Listen("tcp", r.Addr())
	if err != nil {
		t.Fatalf("listen on the released port: %v", err)
	}
	l.Close()
}

// setSockopt returns a ListenConfig.Control that sets one SOL_SOCKET
// option before bind.
func setSockopt(opt, value int) func(_, _ string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt, value) }); cerr != nil {
			return cerr
		}
		return err
	}
}
