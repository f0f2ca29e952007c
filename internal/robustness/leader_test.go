package robustness

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"fencegate/api"
)

// TestLeaderKilledMidWrite kills the etcd leader while a write's fence
// check is in flight at it: the check's transaction reaches the leader
// (and may commit), its answer is lost, and the leader dies. The gateway
// must answer 503 and forward nothing; after recovery, no acked write is
// lost, the write can be retried with the same token, and a smaller token
// is refused. The whole history then passes every checker.
func TestLeaderKilledMidWrite(t *testing.T) {
	needVersityGW(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bins, err := BuildBinaries(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := StartCluster(ctx, ClusterConfig{Dir: filepath.Join(dir, "cluster"), Logf: t.Logf}, bins)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	watcher := StartWatcher(cluster.Client)
	defer watcher.Close()
	clock := StartRevisionClock(cluster.Client, 50*time.Millisecond)
	defer clock.Close()
	workload := NewWorkload(WorkloadConfig{Clients: 1, Objects: 1}, cluster, "leader-kill/")
	defer workload.Close()
	key := workload.Keys()[0]
	gw, other := cluster.Gateways[0], cluster.Gateways[1]

	// Two acked writes with the first holder's token.
	first, release, err := workload.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if op := workload.WriteVia(ctx, gw, key, first); op.Outcome != Acked {
			t.Fatalf("write before the fault: %s %d %s", op.Outcome, op.Status, op.Err)
		}
	}
	release()
	second, release, err := workload.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	// The gateway reaches only the leader (its links to the followers
	// refuse connections), and the leader's answers vanish.
	leader, err := cluster.Leader(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range cluster.Members {
		if m == leader {
			gw.EtcdLinks[i].SetFault(LinkFault{BlackholeRx: true})
		} else {
			gw.EtcdLinks[i].SetFault(LinkFault{Drop: true})
		}
	}
	written := make(chan Op, 1)
	go func() { written <- workload.WriteVia(ctx, gw, key, second) }()

	// Kill the leader once the fence check has committed there (the
	// mark reads `second`), or after 700 ms (it may not have).
	markKey := HWMPrefix + string(api.ObjectPath{Bucket: Bucket, Key: key}.Resource())
	committed := false
	for deadline := time.Now().Add(700 * time.Millisecond); time.Now().Before(deadline) && !committed; {
		rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		resp, err := cluster.Client.Get(rctx, markKey)
		cancel()
		if err == nil && len(resp.Kvs) == 1 {
			if mark, _ := decodeStoredToken(resp.Kvs[0].Value); mark == second {
				committed = true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("killing leader %s mid-write (fence check committed before the kill: %t)", leader.Name, committed)
	leader.Kill()
	op := <-written
	if op.Status != http.StatusServiceUnavailable || op.ProblemType != api.ProblemTypePrefix+"fence-unavailable" {
		t.Errorf("write whose fence check lost its leader: %d %q (%s); want 503 fence-unavailable", op.Status, op.ProblemType, op.Err)
	}
	for _, w := range cluster.S3Proxy.Writes(Bucket + "/" + key) {
		if w.Op == op.ID {
			t.Errorf("the 503 write %s reached S3 (seq %d, status %d): a gateway forwarded a write without a completed fence check", op.ID, w.Seq, w.Status)
		}
	}

	if err := cluster.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	newLeader, err := cluster.Leader(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader after recovery: %s (%s restarted)", newLeader.Name, leader.Name)
	// The ambiguous write, retried with the same token, lands; the first
	// holder's token is now stale.
	if op := workload.WriteVia(ctx, other, key, second); op.Outcome != Acked {
		t.Errorf("retry with the same token after recovery: %s %d %s", op.Outcome, op.Status, op.Err)
	}
	if op := workload.WriteVia(ctx, other, key, first); op.Outcome != RefusedStale {
		t.Errorf("write with the old token after recovery: %s %d %s; want 409 stale", op.Outcome, op.Status, op.Err)
	}
	workload.FinalReads(ctx)

	// The history passes every checker: in particular no acked write was
	// lost, and the mark never went down.
	objects, err := newObjectReader(cluster)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := gatherEvidence(ctx, cluster, watcher, clock, objects, newGCSObjectReader(cluster), workload)
	if err != nil {
		t.Fatal(err)
	}
	res := Check(ev, CheckConfig{ArtifactDir: dir, Name: "leader-kill"})
	for _, v := range res.Violations {
		t.Error(v)
	}
	if res.Linearizability != "Ok" {
		t.Errorf("porcupine: %s", res.Linearizability)
	}
	raised := 0
	for _, e := range ev.HWMEvents[key] {
		if e.Token == second {
			raised++
		}
	}
	t.Logf("fence checks with the second token in etcd's history: %d (the 503's own check %s; then the retry's)",
		raised, map[bool]string{true: "committed before the leader died", false: "did not commit"}[raised > 1])
}
