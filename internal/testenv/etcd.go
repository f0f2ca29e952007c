package testenv

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"

	"fencegate/internal/devstack"
	"fencegate/internal/zapslog"
)

const (
	// etcdRestartAttempts is how many times [Etcd.Restart] tries to listen
	// on the server's ports when another process holds one of them.
	etcdRestartAttempts = 5
	// etcdRestartPause is the wait between those attempts.
	etcdRestartPause = 200 * time.Millisecond
	// etcdDialTimeout is the DialTimeout of the clients made by
	// [Etcd.Client] and [Etcd.CountingClient].
	etcdDialTimeout = 2 * time.Second
)

// Etcd is an embedded single-member etcd listening on 127.0.0.1. It is
// made by [StartEtcd] and keeps its ports and data directory across
// [Etcd.Stop] and [Etcd.Restart]. Its methods are safe for concurrent use.
type Etcd struct {
	cfg       devstack.EtcdConfig // the ports picked at the first start
	endpoints []string

	mu     sync.Mutex
	server *devstack.Etcd // nil while stopped
}

// StartEtcd starts an embedded single-member etcd on two free ports of
// 127.0.0.1 with its data under tb.TempDir, waits until it serves clients,
// and stops it when the test and its subtests finish. The server logs only
// errors, to the test output, so they show for failed tests or with -v.
func StartEtcd(tb testing.TB) *Etcd {
	tb.Helper()
	return StartEtcdWithQuota(tb, 0)
}

// StartEtcdWithQuota is [StartEtcd] with a space quota of quotaBytes for
// etcd's database (zero: etcd's default, 2 GiB): past it, etcd raises its
// NOSPACE alarm and refuses writes until the alarm is disarmed.
func StartEtcdWithQuota(tb testing.TB, quotaBytes int64) *Etcd {
	tb.Helper()
	logger, logWriter := newTBLogger(tb, "etcd: ")
	server, err := devstack.StartEtcd(startContext(tb), devstack.EtcdConfig{
		Dir: tb.TempDir(),
		// The data only has to survive Stop and Restart, which flush it.
		UnsafeNoFsync:     true,
		QuotaBackendBytes: quotaBytes,
		Logger:            logger,
	})
	if err != nil {
		logWriter.detach()
		tb.Fatalf("testenv: %v", err)
	}
	e := &Etcd{cfg: server.Config(), endpoints: server.Endpoints(), server: server}
	tb.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.stopLocked()
		logWriter.detach()
	})
	return e
}

// Endpoints returns the client URLs to give to clientv3.Config.Endpoints,
// such as "http://127.0.0.1:40123". They stay the same across Stop and
// Restart.
func (e *Etcd) Endpoints() []string {
	return e.endpoints
}

// Client returns a new client of e, closed when the test finishes, that
// logs only errors, to the test output. It may be made while e is
// stopped; its requests then fail until e is restarted.
func (e *Etcd) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	return e.newClient(tb)
}

// newClient returns a new client of e with dialOptions, closed when the
// test finishes, that logs only errors, to the test output.
func (e *Etcd) newClient(tb testing.TB, dialOptions ...grpc.DialOption) *clientv3.Client {
	tb.Helper()
	logger, logWriter := newTBLogger(tb, "etcd client: ")
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   e.Endpoints(),
		DialTimeout: etcdDialTimeout,
		DialOptions: dialOptions,
		Logger:      zapslog.Logger(logger, zapcore.ErrorLevel),
	})
	if err != nil {
		logWriter.detach()
		tb.Fatalf("testenv: etcd client for %v: %v", e.Endpoints(), err)
	}
	tb.Cleanup(func() {
		_ = c.Close()
		logWriter.detach()
	})
	return c
}

// Stop stops the server, keeping its data: requests of existing clients
// fail (or wait for their context) until [Etcd.Restart]. Stopping a stopped
// server does nothing.
func (e *Etcd) Stop(tb testing.TB) {
	tb.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopLocked()
}

// Restart starts the server again on the same ports and data directory,
// stopping it first if it is running, and waits until it serves clients.
// Existing clients reconnect on their own.
func (e *Etcd) Restart(tb testing.TB) {
	tb.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopLocked()
	// The old listeners are closed, but a port may have been taken by
	// someone else meanwhile: retry briefly before failing.
	var err error
	for range etcdRestartAttempts {
		e.server, err = devstack.StartEtcd(startContext(tb), e.cfg)
		if !errors.Is(err, devstack.ErrAddrInUse) {
			break
		}
		time.Sleep(etcdRestartPause)
	}
	if err != nil {
		tb.Fatalf("testenv: restart: %v", err)
	}
}

// stopLocked closes the server if it is running. e.mu is held.
func (e *Etcd) stopLocked() {
	if e.server != nil {
		e.server.Close()
		e.server = nil
	}
}

// startContext returns the context for starting a server for tb: unlike
// tb.Context, it is not done while tb's cleanups run, so that a cleanup
// may restart a server too. devstack bounds how long a start may take.
func startContext(tb testing.TB) context.Context {
	return context.WithoutCancel(tb.Context())
}
