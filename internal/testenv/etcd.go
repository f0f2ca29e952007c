package testenv

import (
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

const (
	// etcdReadyTimeout bounds how long a start or restart may take before
	// the test fails.
	etcdReadyTimeout = 30 * time.Second
	// etcdStartAttempts is how many times a fresh etcd is started on new
	// ports when the ports picked were taken in the meantime.
	etcdStartAttempts = 5
	// etcdDialTimeout is the DialTimeout of the clients made by
	// [Etcd.Client].
	etcdDialTimeout = 2 * time.Second
)

// Etcd is an embedded single-member etcd listening on 127.0.0.1. It is
// made by [StartEtcd] and keeps its ports and data directory across
// [Etcd.Stop] and [Etcd.Restart]. Its methods are safe for concurrent use.
type Etcd struct {
	dir       string
	clientURL url.URL
	peerURL   url.URL
	logger    *zap.Logger

	mu     sync.Mutex
	server *embed.Etcd // nil while stopped
}

// StartEtcd starts an embedded single-member etcd on two free ports of
// 127.0.0.1 with its data under tb.TempDir, waits until it serves clients,
// and stops it when the test and its subtests finish. The server logs only
// errors, to the test output, so they show for failed tests or with -v.
func StartEtcd(tb testing.TB) *Etcd {
	tb.Helper()
	logger, logWriter := newTBLogger(tb, "etcd: ")
	e := &Etcd{dir: tb.TempDir(), logger: logger}
	var lastErr error
	for range etcdStartAttempts {
		clientPort, err := freePort()
		if err != nil {
			tb.Fatalf("testenv: start etcd: %v", err)
		}
		peerPort, err := freePort()
		if err != nil {
			tb.Fatalf("testenv: start etcd: %v", err)
		}
		e.clientURL = localURL(clientPort)
		e.peerURL = localURL(peerPort)
		lastErr = e.start()
		if lastErr == nil {
			tb.Cleanup(func() {
				e.stop()
				logWriter.detach()
			})
			return e
		}
		if !isAddrInUse(lastErr) {
			break
		}
		// A port was taken between freePort and the listen: a fresh data
		// directory avoids any state from the failed attempt.
		e.dir = tb.TempDir()
	}
	logWriter.detach()
	tb.Fatalf("testenv: start etcd: %v", lastErr)
	return nil
}

// Endpoints returns the client URLs to give to clientv3.Config.Endpoints,
// such as "http://127.0.0.1:40123". They stay the same across Stop and
// Restart.
func (e *Etcd) Endpoints() []string {
	return []string{e.clientURL.String()}
}

// Client returns a new client of e, closed when the test finishes, that
// logs only errors, to the test output. It may be made while e is
// stopped; its requests then fail until e is restarted.
func (e *Etcd) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	logger, logWriter := newTBLogger(tb, "etcd client: ")
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   e.Endpoints(),
		DialTimeout: etcdDialTimeout,
		Logger:      logger,
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
	e.stop()
}

// Restart starts the server again on the same ports and data directory,
// stopping it first if it is running, and waits until it serves clients.
// Existing clients reconnect on their own.
func (e *Etcd) Restart(tb testing.TB) {
	tb.Helper()
	e.stop()
	// The old listeners are closed, but a port may have been taken by
	// someone else meanwhile: retry briefly before failing.
	var err error
	for range etcdStartAttempts {
		if err = e.start(); err == nil || !isAddrInUse(err) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		tb.Fatalf("testenv: restart etcd: %v", err)
	}
}

// start starts the server with e's ports and data directory and waits
// until it is ready. On failure the server is closed.
func (e *Etcd) start() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.server != nil {
		return nil
	}
	srv, err := embed.StartEtcd(e.config())
	if err != nil {
		return fmt.Errorf("embed.StartEtcd: %w", err)
	}
	timer := time.NewTimer(etcdReadyTimeout)
	defer timer.Stop()
	select {
	case <-srv.Server.ReadyNotify():
		e.server = srv
		return nil
	case err := <-srv.Err():
		srv.Close()
		return fmt.Errorf("etcd at %v failed before ready: %w", e.Endpoints(), err)
	case <-srv.Server.StopNotify():
		srv.Close()
		return fmt.Errorf("etcd at %v stopped before ready", e.Endpoints())
	case <-timer.C:
		srv.Close()
		return fmt.Errorf("etcd at %v not ready after %v", e.Endpoints(), etcdReadyTimeout)
	}
}

// stop closes the server if it is running.
func (e *Etcd) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.server == nil {
		return
	}
	e.server.Close()
	e.server = nil
}

// config returns a new embed.Config for e: embed.StartEtcd changes the
// config it is given, so each start gets its own.
func (e *Etcd) config() *embed.Config {
	cfg := embed.NewConfig()
	cfg.Dir = e.dir
	cfg.ListenClientUrls = []url.URL{e.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{e.clientURL}
	cfg.ListenPeerUrls = []url.URL{e.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{e.peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// One member elects itself within a few ticks.
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	cfg.InitialElectionTickAdvance = true
	// The data only has to survive Stop and Restart, which flush it.
	cfg.UnsafeNoFsync = true
	cfg.EnableGRPCGateway = false
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(e.logger)
	return cfg
}

// localURL returns http://127.0.0.1:port.
func localURL(port int) url.URL {
	return url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(port)}
}
