package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"fencegate/internal/zapslog"
)

const (
	// etcdReadyTimeout bounds how long etcd may take to serve clients.
	etcdReadyTimeout = 30 * time.Second
	// etcdStartAttempts is how many times etcd is started on new free
	// ports when the ports picked were taken in the meantime.
	etcdStartAttempts = 5
	// etcdLockName is the lock file in the data directory that keeps a
	// second server off it: etcd itself would wait for ever on its
	// database's lock.
	etcdLockName = "devstack.lock"
	// DefaultCompactionRetention is the history an embedded etcd keeps
	// when EtcdConfig.CompactionRetention is zero. A watch or read from
	// an older revision fails with etcd's ErrCompacted; the token store
	// then reads the current state again. Five minutes is far longer than
	// any watch of the token store lags behind, and at 1,000 fence raises
	// a second (about 140 bytes each) keeps some 40 MB of history.
	DefaultCompactionRetention = 5 * time.Minute
)

// errLocked says that another process is using a data directory.
var errLocked = errors.New("in use by another process")

// EtcdConfig configures an embedded etcd.
type EtcdConfig struct {
	// Dir is the data directory. It is created (mode 0700) if missing,
	// and reused if it holds data of an earlier run. Only one Etcd at a
	// time may use it: a second start fails at once. Required.
	Dir string
	// ClientPort and PeerPort are the ports on 127.0.0.1 for clients
	// and for peers. Zero means a free port, picked at start.
	ClientPort int
	PeerPort   int
	// UnsafeNoFsync skips fsync: faster, but a crash of the machine (not
	// Close) may lose recent writes. For tests.
	UnsafeNoFsync bool
	// QuotaBackendBytes is the size the database may grow to before etcd
	// raises its NOSPACE alarm and refuses writes. Zero means etcd's
	// default (2 GiB).
	QuotaBackendBytes int64
	// CompactionRetention is how much history etcd keeps: every
	// revision older than this is compacted away, periodically (etcd's
	// periodic auto-compaction), so that a long run does not fill the
	// quota with old revisions. Zero means DefaultCompactionRetention;
	// a negative value turns auto-compaction off.
	CompactionRetention time.Duration
	// Logger receives etcd's errors. Nil discards them.
	Logger *slog.Logger
}

// Etcd is an embedded single-member etcd serving clients on 127.0.0.1.
type Etcd struct {
	server    *embed.Etcd
	cfg       EtcdConfig // with the ports in use
	lock      *os.File   // held until Close
	clientURL url.URL
	closing   *atomic.Bool // shared with the server's log core
	closeOnce sync.Once
}

// StartEtcd starts an embedded single-member etcd and waits until it serves
// clients, ctx is done, or 30 seconds pass. When a port is zero and the
// free port picked is taken before etcd binds it, it tries again on new
// ports; when a port given is taken, the error wraps [ErrAddrInUse]. The
// caller closes the Etcd.
func StartEtcd(ctx context.Context, cfg EtcdConfig) (*Etcd, error) {
	if cfg.Dir == "" {
		return nil, errors.New("start etcd: no data directory")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	lock, err := lockFile(filepath.Join(cfg.Dir, etcdLockName))
	if err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	retry := cfg.ClientPort == 0 || cfg.PeerPort == 0
	var lastErr error
	for range etcdStartAttempts {
		e, err := startEtcd(ctx, cfg)
		if err == nil {
			e.lock = lock
			return e, nil
		}
		lastErr = err
		if !retry || !isAddrInUse(err) || ctx.Err() != nil {
			break
		}
	}
	lock.Close()
	if isAddrInUse(lastErr) && !errors.Is(lastErr, ErrAddrInUse) {
		lastErr = fmt.Errorf("%w: %w", ErrAddrInUse, lastErr)
	}
	return nil, fmt.Errorf("start etcd: %w", lastErr)
}

// startEtcd makes one attempt at starting etcd.
func startEtcd(ctx context.Context, cfg EtcdConfig) (*Etcd, error) {
	clientPort, peerPort := cfg.ClientPort, cfg.PeerPort
	if err := fillFreePorts(&clientPort, &peerPort); err != nil {
		return nil, err
	}
	if clientPort == peerPort {
		return nil, fmt.Errorf("client and peer port are both %d", clientPort)
	}
	clientURL, peerURL := localURL(clientPort), localURL(peerPort)

	ec := embed.NewConfig()
	ec.Dir = cfg.Dir
	ec.ListenClientUrls = []url.URL{clientURL}
	ec.AdvertiseClientUrls = []url.URL{clientURL}
	ec.ListenPeerUrls = []url.URL{peerURL}
	ec.AdvertisePeerUrls = []url.URL{peerURL}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	// One member elects itself within a few ticks.
	ec.TickMs = 10
	ec.ElectionMs = 100
	ec.InitialElectionTickAdvance = true
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	ec.QuotaBackendBytes = cfg.QuotaBackendBytes
	// Without compaction etcd keeps every revision, and every fence
	// raise is one: the quota fills, and then etcd refuses every write.
	ec.AutoCompactionMode = embed.CompactorModePeriodic
	switch retention := cfg.CompactionRetention; {
	case retention < 0:
		ec.AutoCompactionRetention = "0" // off
	case retention == 0:
		ec.AutoCompactionRetention = DefaultCompactionRetention.String()
	default:
		ec.AutoCompactionRetention = retention.String()
	}
	ec.EnableGRPCGateway = false
	ec.LogLevel = "error"
	closing := new(atomic.Bool)
	logger := zap.NewNop()
	if cfg.Logger != nil {
		logger = zap.New(&etcdLogCore{
			Core:    zapslog.Core(cfg.Logger, zapcore.DebugLevel),
			closing: closing,
		})
	}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger)

	srv, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, err
	}
	timer := time.NewTimer(etcdReadyTimeout)
	defer timer.Stop()
	select {
	case <-srv.Server.ReadyNotify():
		cfg.ClientPort, cfg.PeerPort = clientPort, peerPort
		return &Etcd{server: srv, cfg: cfg, clientURL: clientURL, closing: closing}, nil
	case err := <-srv.Err():
		srv.Close()
		return nil, fmt.Errorf("etcd at %s failed before ready: %w", clientURL.String(), err)
	case <-srv.Server.StopNotify():
		srv.Close()
		return nil, fmt.Errorf("etcd at %s stopped before ready", clientURL.String())
	case <-timer.C:
		srv.Close()
		return nil, fmt.Errorf("etcd at %s not ready after %v", clientURL.String(), etcdReadyTimeout)
	case <-ctx.Done():
		srv.Close()
		return nil, fmt.Errorf("etcd at %s: %w", clientURL.String(), context.Cause(ctx))
	}
}

// Endpoints returns the client URLs, such as "http://127.0.0.1:40123",
// for clientv3.Config.Endpoints.
func (e *Etcd) Endpoints() []string {
	return []string{e.clientURL.String()}
}

// Config returns the configuration e was started with, its ClientPort and
// PeerPort set to the ports in use. Once e is closed, StartEtcd with it
// starts the server again on the same ports and data directory.
func (e *Etcd) Config() EtcdConfig {
	return e.cfg
}

// Close stops etcd, waiting briefly for in-flight requests, and flushes
// its data. Closing twice does nothing.
func (e *Etcd) Close() {
	e.closeOnce.Do(func() {
		e.closing.Store(true)
		e.server.Close()
		e.lock.Close()
	})
}

// etcdLogCore passes etcd's errors on, except those that are part of the
// normal life of a single local member, which it demotes to debug.
type etcdLogCore struct {
	zapcore.Core
	closing *atomic.Bool // set by Close
}

func (c *etcdLogCore) With(fields []zapcore.Field) zapcore.Core {
	return &etcdLogCore{Core: c.Core.With(fields), closing: c.closing}
}

func (c *etcdLogCore) Check(entry zapcore.Entry, checked *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	switch {
	case entry.Level < zapcore.ErrorLevel:
		return checked
	// A fresh member reports this until its first raft term is stored.
	case entry.Message == "failed to update storage version",
		// Close reports every listener it closes as a failure.
		c.closing.Load() && entry.Message == "setting up serving from embedded etcd failed.":
		entry.Level = zapcore.DebugLevel
	}
	return c.Core.Check(entry, checked)
}
