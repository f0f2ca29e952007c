package tokenstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
	"fencegate/internal/testenv"
)

// noSpaceQuota is the database quota of the etcd that tests fill: small,
// so that a few hundred KiB of writes reach it.
const noSpaceQuota = 1 << 20

// fillUntilNoSpace writes large values under fill/ until etcd refuses a
// write with NOSPACE, and fails the test if it never does.
func fillUntilNoSpace(tb testing.TB, client *clientv3.Client) {
	tb.Helper()
	value := strings.Repeat("x", 64<<10)
	for i := range 1000 {
		_, err := client.Put(context.Background(), fmt.Sprintf("fill/%04d", i), value)
		if errors.Is(err, rpctypes.ErrNoSpace) {
			return
		}
		if err != nil {
			tb.Fatalf("filling etcd: put %d: %v", i, err)
		}
	}
	tb.Fatalf("etcd with a %d-byte quota took 1000 writes of %d bytes without NOSPACE", noSpaceQuota, len(value))
}

// recoverFromNoSpace does what the operator does (docs/operations.md):
// delete what filled the database, compact, defragment, disarm.
func recoverFromNoSpace(tb testing.TB, client *clientv3.Client, endpoints []string) {
	tb.Helper()
	ctx := context.Background()
	resp, err := client.Delete(ctx, "fill/", clientv3.WithPrefix())
	if err != nil {
		tb.Fatalf("delete fill/: %v", err)
	}
	if _, err := client.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		tb.Fatalf("compact: %v", err)
	}
	for _, e := range endpoints {
		if _, err := client.Defragment(ctx, e); err != nil {
			tb.Fatalf("defragment %s: %v", e, err)
		}
	}
	alarms, err := client.AlarmList(ctx)
	if err != nil {
		tb.Fatalf("alarm list: %v", err)
	}
	for _, a := range alarms.Alarms {
		if _, err := client.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: a.MemberID, Alarm: a.Alarm}); err != nil {
			tb.Fatalf("alarm disarm: %v", err)
		}
	}
}

// TestNoSpace: when etcd's database reaches its quota, a fence check that
// must raise a mark is unavailable, and says that etcd is out of space;
// Ping fails naming the alarm. Once the operator has compacted,
// defragmented and disarmed, both recover.
func TestNoSpace(t *testing.T) {
	etcd := testenv.StartEtcdWithQuota(t, noSpaceQuota)
	client := etcd.Client(t)
	s := newStore(t, client)
	ctx := context.Background()
	if err := s.FenceCheck(ctx, "s3/b/k", 5); err != nil {
		t.Fatal(err)
	}
	fillUntilNoSpace(t, client)

	err := s.FenceCheck(ctx, "s3/b/k", 6)
	if !errors.Is(err, api.ErrUnavailable) || !errors.Is(err, api.ErrNoSpace) || !strings.Contains(err.Error(), "etcd is out of space") {
		t.Errorf("FenceCheck(6) with NOSPACE = %v; want ErrUnavailable saying etcd is out of space", err)
	}
	if err := s.Ping(ctx); !errors.Is(err, api.ErrNoSpace) || !strings.Contains(err.Error(), "NOSPACE alarm raised") {
		t.Errorf("Ping with NOSPACE = %v; want an error naming the NOSPACE alarm", err)
	}
	// A refusal needs no write: it is still decided.
	if err := s.FenceCheck(ctx, "s3/b/k", 4); !errors.Is(err, api.ErrStaleToken) {
		t.Errorf("FenceCheck(4) with NOSPACE = %v; want stale", err)
	}

	space, err := s.Space(ctx)
	if err != nil || space.Quota != noSpaceQuota || space.Size < noSpaceQuota*8/10 || space.InUse <= 0 || space.InUse > space.Size {
		t.Errorf("Space with NOSPACE = %+v, %v; want a quota of %d, a size near it, and a part of it in use", space, err, noSpaceQuota)
	}

	recoverFromNoSpace(t, client, etcd.Endpoints())
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping after recovery = %v", err)
	}
	if err := s.FenceCheck(ctx, "s3/b/k", 6); err != nil {
		t.Errorf("FenceCheck(6) after recovery = %v", err)
	}
	if after, err := s.Space(ctx); err != nil || after.Size >= space.Size {
		t.Errorf("Space after recovery = %+v, %v; want smaller than %+v", after, err, space)
	}
}
