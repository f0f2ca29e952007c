package robustness

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/internal/testenv"
)

// TestCompactorCompactsToTheCurrentRevision: a running Compactor leaves
// nothing of etcd's history behind the revision of the last write: a read
// at that write's revision minus one is refused as compacted.
func TestCompactorCompactsToTheCurrentRevision(t *testing.T) {
	client := testenv.StartEtcd(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	compactor := StartCompactor(client, 20*time.Millisecond)
	var rev int64
	for range 3 {
		resp, err := client.Put(ctx, "k", "v")
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	// Both: etcd applies a compaction before the compactor reads its
	// answer, and Stop would cut that answer off.
	testenv.WaitUntil(t, 10*time.Second, "a read of the revision before the last write is refused as compacted, and the compactor counted it", func() bool {
		_, err := client.Get(ctx, "k", clientv3.WithRev(rev-1))
		return errors.Is(err, rpctypes.ErrCompacted) && compactor.made() >= 1
	})
	if n := compactor.Stop(); n < 1 {
		t.Errorf("Stop() = %d compactions; want at least 1", n)
	}
}

// TestCompactionHistoriesAreAThird: compactionHistory picks about a third
// of the seeds, and is a function of the seed.
func TestCompactionHistoriesAreAThird(t *testing.T) {
	n := 0
	for seed := range uint64(600) {
		first := compactionHistory(seed)
		if first {
			n++
		}
		if again := compactionHistory(seed); again != first {
			t.Fatalf("compactionHistory(%d) = %t, then %t", seed, first, again)
		}
	}
	if n < 150 || n > 250 {
		t.Errorf("compactionHistory picks %d of 600 seeds; want about 200", n)
	}
}
