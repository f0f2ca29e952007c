// Command etcdnode runs one etcd member for the robustness suite: a small
// main over go.etcd.io/etcd/server/v3/embed, built by the suite's harness
// with `go build` from the etcd version pinned in go.mod, and run as a
// child process so that the harness can SIGKILL it (a crash), restart it
// on the same data directory, and SIGSTOP/SIGCONT it (a pause).
//
// Why embed and not etcd's own server main (etcdmain.Main): etcdmain
// brings in dependencies that fencegate's go.mod does not have (cobra, for
// its gRPC gateway command), while embed is already pinned and is what
// etcdmain itself calls to start a member, so the Raft, storage and
// transport code that runs is the same. This main also prints one line,
// "etcdnode: ready", once the member has joined the cluster and serves
// clients, which the harness waits for.
//
// It takes only the flags the harness needs; it is not a general etcd.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "etcdnode: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("etcdnode", flag.ContinueOnError)
	var (
		name           = fs.String("name", "", "member name (required)")
		dir            = fs.String("data-dir", "", "data directory, kept across restarts (required)")
		listenPeer     = fs.String("listen-peer-url", "", "URL the member listens on for peers (required)")
		advertisePeer  = fs.String("advertise-peer-url", "", "URL peers dial to reach this member, such as its fault proxy (default: --listen-peer-url)")
		listenClient   = fs.String("listen-client-url", "", "URL the member listens on for clients (required)")
		initialCluster = fs.String("initial-cluster", "", "name=peerURL,... of every member (required)")
		clusterToken   = fs.String("initial-cluster-token", "robustness", "token that keeps separate clusters apart")
		tickMs         = fs.Uint("heartbeat-interval", 50, "Raft heartbeat interval in milliseconds")
		electionMs     = fs.Uint("election-timeout", 500, "Raft election timeout in milliseconds")
		snapshotCount  = fs.Uint64("snapshot-count", 10000, "committed entries between snapshots")
		logFile        = fs.String("log-file", "", "file for etcd's log (default: stderr)")
		logLevel       = fs.String("log-level", "warn", "etcd's log level")
		readyTimeout   = fs.Duration("ready-timeout", 60*time.Second, "bound on becoming ready")
		unsafeNoFsync  = fs.Bool("unsafe-no-fsync", false, "skip fsync (survives a process crash, not a power loss)")
		closeTimeout   = fs.Duration("close-timeout", 5*time.Second, "bound on a graceful stop on SIGTERM")
		reusePort      = fs.Bool("socket-reuse-port", false, "listen with SO_REUSEPORT, on ports that the harness holds reserved")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	for flagName, v := range map[string]string{"name": *name, "data-dir": *dir, "listen-peer-url": *listenPeer,
		"listen-client-url": *listenClient, "initial-cluster": *initialCluster} {
		if v == "" {
			return fmt.Errorf("--%s is required", flagName)
		}
	}
	if *advertisePeer == "" {
		*advertisePeer = *listenPeer
	}
	urls := map[string]*url.URL{}
	for flagName, v := range map[string]string{"listen-peer-url": *listenPeer, "advertise-peer-url": *advertisePeer, "listen-client-url": *listenClient} {
		u, err := url.Parse(v)
		if err != nil || u.Scheme != "http" || u.Host == "" {
			return fmt.Errorf("--%s %q: want http://host:port", flagName, v)
		}
		urls[flagName] = u
	}

	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dir
	cfg.ListenPeerUrls = []url.URL{*urls["listen-peer-url"]}
	cfg.AdvertisePeerUrls = []url.URL{*urls["advertise-peer-url"]}
	cfg.ListenClientUrls = []url.URL{*urls["listen-client-url"]}
	cfg.AdvertiseClientUrls = []url.URL{*urls["listen-client-url"]}
	cfg.InitialCluster = *initialCluster
	cfg.InitialClusterToken = *clusterToken
	// With data in Dir, etcd restarts from its WAL and ignores the
	// initial cluster: "new" is right for the first start and restarts.
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.TickMs = *tickMs
	cfg.ElectionMs = *electionMs
	cfg.SnapshotCount = *snapshotCount
	cfg.UnsafeNoFsync = *unsafeNoFsync
	cfg.SocketOpts.ReusePort = *reusePort
	cfg.LogLevel = *logLevel
	if *logFile != "" {
		cfg.LogOutputs = []string{*logFile}
	} else {
		cfg.LogOutputs = []string{"stderr"}
	}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start %s: %w", *name, err)
	}
	defer e.Close()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-e.Server.ReadyNotify():
		fmt.Println("etcdnode: ready")
	case err := <-e.Err():
		return fmt.Errorf("%s failed before ready: %w", *name, err)
	case <-time.After(*readyTimeout):
		return fmt.Errorf("%s not ready after %v", *name, *readyTimeout)
	case sig := <-signals:
		return fmt.Errorf("%s: %v before ready", *name, sig)
	}
	select {
	case err := <-e.Err():
		return fmt.Errorf("%s: %w", *name, err)
	case <-e.Server.StopNotify():
		return fmt.Errorf("%s stopped", *name)
	case <-signals:
		done := make(chan struct{})
		go func() { e.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(*closeTimeout):
		}
		return nil
	}
}
