package robustness

import (
	"context"
	"errors"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestMemberKeepsItsPortsWhileDown kills a member and, while it is down,
// lets other sockets of this machine try to take its client and peer
// ports, as the suite's own traffic can: a listener, and an outgoing
// connection whose local port is the member's (the kernel picks such a
// port for every connection a gateway or proxy opens). Neither may get
// it, and the member then restarts on both. Before ports were reserved,
// a member whose port had been taken exited at its start ("exited before
// it was ready"), and the test that killed it failed on the harness.
func TestMemberKeepsItsPortsWhileDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bins, err := BuildBinaries(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{cfg: ClusterConfig{Members: 1, Dir: dir, Logf: t.Logf}, memberIDs: make(map[string]string)}
	defer c.Close()
	if err := c.startMembers(ctx, bins.Etcdnode); err != nil {
		t.Fatal(err)
	}
	m := c.Members[0]
	client, err := url.Parse(m.ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]string{"client": client.Host, "peer": m.PeerProxy.Target()}

	m.Kill()
	elsewhere, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer elsewhere.Close()
	for name, addr := range ports {
		for _, intruder := range []struct {
			how  string
			take func(addr string) (func() error, error)
		}{
			{"a listener", func(addr string) (func() error, error) {
				l, err := net.Listen("tcp", addr)
				if err != nil {
					return nil, err
				}
				return l.Close, nil
			}},
			{"an outgoing connection's local port", func(addr string) (func() error, error) {
				local, err := net.ResolveTCPAddr("tcp", addr)
				if err != nil {
					return nil, err
				}
				d := net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}
				conn, err := d.DialContext(ctx, "tcp", elsewhere.Addr().String())
				if err != nil {
					return nil, err
				}
				return conn.Close, nil
			}},
		} {
			release, err := intruder.take(addr)
			if err == nil {
				// Hold it: the restart below shows what that costs.
				defer release()
				t.Errorf("%s took the %s port %s of a member that is down", intruder.how, name, addr)
				continue
			}
			if !errors.Is(err, syscall.EADDRINUSE) {
				t.Errorf("%s on the %s port %s: %v, want EADDRINUSE", intruder.how, name, addr, err)
			}
		}
	}

	if err := m.Restart(ctx); err != nil {
		t.Fatalf("restart on its ports: %v", err)
	}
	if got := m.ClientURL; got != "http://"+ports["client"] {
		t.Fatalf("client URL %s after the restart, want the same port as before (%s)", got, ports["client"])
	}
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	if _, err := c.Client.Put(rctx, "ports-test", strconv.Itoa(m.Starts())); err != nil {
		t.Fatalf("put through the restarted member: %v", err)
	}
}
