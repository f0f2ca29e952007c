package robustness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
)

// FaultKind names a fault the nemesis injects.
type FaultKind string

// The faults. Each history draws at least two.
const (
	KillLeader      FaultKind = "kill-leader"       // SIGKILL the etcd leader, restart it on its data
	KillFollower    FaultKind = "kill-follower"     // SIGKILL a follower, restart it
	StopMember      FaultKind = "stop-member"       // SIGSTOP a member, then SIGCONT
	IsolateLeader   FaultKind = "isolate-leader"    // blackhole every peer link of the leader
	GatewayCut      FaultKind = "gateway-etcd-cut"  // blackhole a gateway's links to every member
	LinkDelay       FaultKind = "link-delay"        // 100±50 ms on the peer links, or on a gateway's links
	LinkDrop        FaultKind = "link-drop"         // a gateway's S3 link refuses connections
	LinkReset       FaultKind = "link-reset"        // RST every connection of a gateway's links
	PauseAfterFence FaultKind = "pause-after-fence" // hold a write between fence check and PUT; its holder's lease is revoked
	S3Errors        FaultKind = "s3-5xx"            // S3 answers 5xx, before or after committing
	S3DropReply     FaultKind = "s3-drop-reply"     // S3 commits, then the reply is dropped
	Compaction      FaultKind = "compaction"        // compact etcd's history
)

// AllFaults lists every fault kind, in the order the figures print them.
var AllFaults = []FaultKind{KillLeader, KillFollower, StopMember, IsolateLeader, GatewayCut, LinkDelay,
	LinkDrop, LinkReset, PauseAfterFence, S3Errors, S3DropReply, Compaction}

// Fault is one planned fault: what, when (after the history's start) and
// for how long.
type Fault struct {
	Kind FaultKind
	At   time.Duration
	For  time.Duration
	// Target picks the gateway (for gateway faults) or member.
	Target int
}

func (f Fault) String() string {
	return fmt.Sprintf("%s@%s+%s#%d", f.Kind, formatMillis(f.At), formatMillis(f.For), f.Target)
}

// Plan is a history's faults, in time order, never overlapping.
type Plan []Fault

func (p Plan) String() string {
	var parts []string
	for _, f := range p {
		parts = append(parts, f.String())
	}
	return strings.Join(parts, " ")
}

// DrawPlan draws n faults of the given kinds (all kinds if none), one
// after another from 300 ms on, each lasting 500 to 1500 ms with a gap of
// 200 to 600 ms.
func DrawPlan(rnd *rand.Rand, n int, kinds []FaultKind) Plan {
	if len(kinds) == 0 {
		kinds = AllFaults
	}
	var plan Plan
	at := 300 * time.Millisecond
	for range n {
		f := Fault{
			Kind:   kinds[rnd.IntN(len(kinds))],
			At:     at,
			For:    time.Duration(500+rnd.IntN(1000)) * time.Millisecond,
			Target: rnd.IntN(1 << 16),
		}
		plan = append(plan, f)
		at += f.For + time.Duration(200+rnd.IntN(400))*time.Millisecond
	}
	return plan
}

// Nemesis injects a plan's faults into a cluster.
type Nemesis struct {
	cluster  *Cluster
	workload *Workload
	watcher  *Watcher
	logf     func(string, ...any)

	mu       sync.Mutex
	injected map[FaultKind]int
	notes    []string
}

// NewNemesis returns a nemesis for cluster, whose pauses revoke the leases
// of workload's lock holders, and whose compactions keep behind watcher.
func NewNemesis(cluster *Cluster, workload *Workload, watcher *Watcher, logf func(string, ...any)) *Nemesis {
	return &Nemesis{cluster: cluster, workload: workload, watcher: watcher, logf: logf, injected: make(map[FaultKind]int)}
}

// Injected returns how many faults of each kind were injected.
func (n *Nemesis) Injected() map[FaultKind]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[FaultKind]int, len(n.injected))
	for k, v := range n.injected {
		out[k] = v
	}
	return out
}

// Notes returns what the nemesis did, for a failing history's report.
func (n *Nemesis) Notes() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.notes...)
}

func (n *Nemesis) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	n.mu.Lock()
	n.notes = append(n.notes, msg)
	n.mu.Unlock()
	n.logf("nemesis: %s", msg)
}

// Run injects the plan's faults at their times, each undone when its time
// is up, and returns when the last one is undone or ctx ends.
func (n *Nemesis) Run(ctx context.Context, start time.Time, plan Plan) {
	sort.SliceStable(plan, func(i, j int) bool { return plan[i].At < plan[j].At })
	for _, f := range plan {
		select {
		case <-time.After(time.Until(start.Add(f.At))):
		case <-ctx.Done():
			return
		}
		undo, ok := n.inject(ctx, f)
		if !ok {
			continue
		}
		n.mu.Lock()
		n.injected[f.Kind]++
		n.mu.Unlock()
		select {
		case <-time.After(f.For):
		case <-ctx.Done():
		}
		if undo != nil {
			undo()
		}
	}
}

// inject starts f and returns what undoes it, and whether it was
// injected.
func (n *Nemesis) inject(ctx context.Context, f Fault) (undo func(), ok bool) {
	c := n.cluster
	gw := c.Gateways[f.Target%len(c.Gateways)]
	switch f.Kind {
	case KillLeader, KillFollower, StopMember, IsolateLeader:
		leader, err := c.Leader(ctx, 3*time.Second)
		if err != nil {
			n.note("%s skipped: %v", f.Kind, err)
			return nil, false
		}
		victim := leader
		if f.Kind == KillFollower || f.Kind == StopMember && f.Target%2 == 1 {
			followers := c.Followers(leader)
			if len(followers) == 0 {
				n.note("%s skipped: no follower", f.Kind)
				return nil, false
			}
			victim = followers[f.Target%len(followers)]
		}
		switch f.Kind {
		case KillLeader, KillFollower:
			n.note("%s: SIGKILL %s for %v", f.Kind, victim.Name, f.For)
			victim.Kill()
			return func() {
				if err := victim.Restart(ctx); err != nil {
					n.note("restart %s: %v", victim.Name, err)
				}
			}, true
		case StopMember:
			n.note("%s: SIGSTOP %s (leader: %t) for %v", f.Kind, victim.Name, victim == leader, f.For)
			victim.Stop()
			return victim.Continue, true
		default:
			n.note("%s: isolate %s for %v", f.Kind, victim.Name, f.For)
			c.Isolate(victim)
			return func() {
				for _, m := range c.Members {
					m.PeerProxy.Heal()
				}
			}, true
		}
	case GatewayCut:
		n.note("%s: blackhole %s's links to every member for %v", f.Kind, gw.Name, f.For)
		for _, p := range gw.EtcdLinks {
			p.SetFault(LinkFault{BlackholeTx: true, BlackholeRx: true})
		}
		return func() {
			for _, p := range gw.EtcdLinks {
				p.Heal()
			}
		}, true
	case LinkDelay:
		delay := LinkFault{Delay: 100 * time.Millisecond, Jitter: 50 * time.Millisecond}
		var links []*Proxy
		switch f.Target % 3 {
		case 0:
			for _, m := range c.Members {
				links = append(links, m.PeerProxy)
			}
			n.note("%s: %s on every peer link for %v", f.Kind, delay, f.For)
		case 1:
			links = gw.EtcdLinks
			n.note("%s: %s on %s's etcd links for %v", f.Kind, delay, gw.Name, f.For)
		default:
			links = []*Proxy{gw.S3Link, gw.GCSLink}
			n.note("%s: %s on %s's S3 and GCS links for %v", f.Kind, delay, gw.Name, f.For)
		}
		for _, p := range links {
			p.SetFault(delay)
		}
		return func() {
			for _, p := range links {
				p.Heal()
			}
		}, true
	case LinkDrop:
		n.note("%s: %s's S3 and GCS links refuse connections for %v", f.Kind, gw.Name, f.For)
		gw.S3Link.SetFault(LinkFault{Drop: true})
		gw.GCSLink.SetFault(LinkFault{Drop: true})
		return func() { gw.S3Link.Heal(); gw.GCSLink.Heal() }, true
	case LinkReset:
		n.note("%s: RST every connection of %s", f.Kind, gw.Name)
		for _, p := range append([]*Proxy{gw.S3Link, gw.GCSLink}, gw.EtcdLinks...) {
			p.SetFault(LinkFault{Reset: true})
		}
		return nil, true
	case PauseAfterFence:
		n.note("%s: arm %s for %v", f.Kind, gw.Name, f.For)
		gw.Pause.Arm(n.holdWrite)
		return gw.Pause.ReleaseAll, true
	case S3Errors:
		n.note("%s: the store proxies answer 5xx to 40%% of writes (15%% before, 25%% after committing) for %v", f.Kind, f.For)
		c.SetStoreFault(S3Fault{ErrorBefore: 0.15, ErrorAfter: 0.25})
		return func() { c.SetStoreFault(S3Fault{}) }, true
	case S3DropReply:
		n.note("%s: the store proxies drop the reply of 30%% of committed writes for %v", f.Kind, f.For)
		c.SetStoreFault(S3Fault{DropAfter: 0.3})
		return func() { c.SetStoreFault(S3Fault{}) }, true
	case Compaction:
		rev, err := n.compactionRevision(ctx)
		if err != nil {
			n.note("%s skipped: %v", f.Kind, err)
			return nil, false
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := c.Client.Compact(cctx, rev); err != nil {
			n.note("%s at revision %d failed: %v", f.Kind, rev, err)
			return nil, false
		}
		n.note("%s: compacted etcd at revision %d", f.Kind, rev)
		return nil, true
	}
	n.note("unknown fault %q", f.Kind)
	return nil, false
}

// compactionRevision is the current revision, but never past what the HWM
// watcher has seen: compacting ahead of a watcher would lose the history
// the checkers read.
func (n *Nemesis) compactionRevision(ctx context.Context) (int64, error) {
	gctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := n.cluster.Client.Get(gctx, "compaction-probe", clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	rev := resp.Header.Revision
	if seen := n.watcher.Progress(); seen < rev {
		rev = seen
	}
	if rev < 2 {
		return 0, fmt.Errorf("nothing to compact (revision %d)", rev)
	}
	return rev, nil
}

// holdWrite is what an armed pause controller does with the write it
// holds: the write has passed its fence check and waits before its PUT.
// Its lock holder stalls there: revoke the holder's lease, so that the
// lock passes on, and wait until a write with a larger token to the same
// object is acked (or the controller's bound, or release).
func (n *Nemesis) holdWrite(resource api.Resource, token api.Token, release <-chan struct{}) {
	key, ok := strings.CutPrefix(string(resource), n.workload.resourcePrefix())
	if !ok {
		return
	}
	n.note("pause-after-fence: holding a write to %s with token %d", key, token)
	if lease, ok := n.workload.HolderLease(key, token); ok {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := n.cluster.Client.Revoke(ctx, lease)
		cancel()
		if err != nil {
			n.note("pause-after-fence: revoke the holder's lease: %v", err)
		}
	}
	deadline := time.Now().Add(maxPause - 200*time.Millisecond)
	for time.Now().Before(deadline) {
		if n.workload.History().AckedAbove(key, token) {
			// Let the newer write's answer settle, then go on.
			time.Sleep(20 * time.Millisecond)
			n.note("pause-after-fence: a larger token was acked on %s; releasing token %d", key, token)
			return
		}
		select {
		case <-release:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}
