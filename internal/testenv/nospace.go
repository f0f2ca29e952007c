package testenv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// FillUntilNoSpace writes large values under "fill/" until etcd refuses a
// write with NOSPACE (start it with [StartEtcdWithQuota] and a small
// quota), and fails the test if 1000 writes of 64 KiB never get there.
func FillUntilNoSpace(tb testing.TB, client *clientv3.Client) {
	tb.Helper()
	value := strings.Repeat("x", 64<<10)
	for i := range 1000 {
		_, err := client.Put(context.Background(), fmt.Sprintf("fill/%04d", i), value)
		if errors.Is(err, rpctypes.ErrNoSpace) {
			return
		}
		if err != nil {
			tb.Fatalf("testenv: filling etcd: put %d: %v", i, err)
		}
	}
	tb.Fatalf("testenv: etcd took 1000 writes of %d bytes without NOSPACE", len(value))
}

// DisarmAlarms disarms every alarm etcd has raised, and nothing else: a
// database still over its quota raises NOSPACE again at its next write.
func DisarmAlarms(tb testing.TB, client *clientv3.Client) {
	tb.Helper()
	ctx := context.Background()
	alarms, err := client.AlarmList(ctx)
	if err != nil {
		tb.Fatalf("testenv: alarm list: %v", err)
	}
	for _, a := range alarms.Alarms {
		if _, err := client.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: a.MemberID, Alarm: a.Alarm}); err != nil {
			tb.Fatalf("testenv: alarm disarm: %v", err)
		}
	}
}

// RecoverFromNoSpace does what an operator does after NOSPACE
// (docs/operations.md), for what [FillUntilNoSpace] wrote: delete it,
// compact, defragment every member at endpoints, disarm the alarms.
func RecoverFromNoSpace(tb testing.TB, client *clientv3.Client, endpoints []string) {
	tb.Helper()
	ctx := context.Background()
	resp, err := client.Delete(ctx, "fill/", clientv3.WithPrefix())
	if err != nil {
		tb.Fatalf("testenv: delete fill/: %v", err)
	}
	if _, err := client.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		tb.Fatalf("testenv: compact: %v", err)
	}
	for _, ep := range endpoints {
		if _, err := client.Defragment(ctx, ep); err != nil {
			tb.Fatalf("testenv: defragment %s: %v", ep, err)
		}
	}
	DisarmAlarms(tb, client)
}
