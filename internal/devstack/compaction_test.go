package devstack_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/internal/devstack"
	"fencegate/internal/testenv"
)

// TestEtcdCompacts: the embedded etcd compacts its history on its
// own, so a long run does not fill etcd's quota with old revisions. With a
// retention of a second, a read at a revision written before the first
// compaction fails with ErrCompacted, and the newest value stays readable.
func TestEtcdCompacts(t *testing.T) {
	e := startEtcdConfig(t, devstack.EtcdConfig{
		Dir:                 t.TempDir(),
		UnsafeNoFsync:       true,
		CompactionRetention: time.Second,
		Logger:              testLogger(t),
	})
	c := etcdClient(t, e)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	first, err := c.Put(ctx, "k", "0")
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	oldRev := first.Header.Revision
	for i := 1; i <= 20; i++ {
		if _, err := c.Put(ctx, "k", fmt.Sprint(i)); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}
	// The periodic compactor compacts to the revision it noted a
	// retention ago; new writes keep giving it newer revisions to note.
	i := 0
	testenv.WaitUntil(t, 45*time.Second, fmt.Sprintf("a read at revision %d fails with ErrCompacted", oldRev), func() bool {
		_, err := c.Get(ctx, "k", clientv3.WithRev(oldRev))
		if errors.Is(err, rpctypes.ErrCompacted) {
			return true
		}
		if err != nil {
			t.Fatalf("Get(k, rev %d): %v; want a value or ErrCompacted", oldRev, err)
		}
		i++
		if _, err := c.Put(ctx, "k", fmt.Sprint("later-", i)); err != nil {
			t.Fatalf("Put: %v", err)
		}
		return false
	})
	resp, err := c.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get(k) after compaction = %v, %v; want the newest value", resp, err)
	}
}
