package tokenstore_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/api"
	"fencegate/internal/testenv"
)

// TestAdmissionExpiresIsALowerBound: an admission's Expires is at least
// its Hold away, and no later than the marker's lease as etcd counts it,
// for a new lease and for one reused from the pool.
func TestAdmissionExpiresIsALowerBound(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client := etcd.Client(t)
	_, p := newPartners(t, client, time.Second)
	for _, account := range []string{"e1", "e2"} { // e2 reuses e1's lease
		req := admission(1, 0)
		req.Resource = api.PartnerResource("payments", "accounts/"+account)
		before := time.Now()
		adm := mustAdmit(t, p, req)
		if adm.Expires.Before(before.Add(req.Hold)) {
			t.Fatalf("%s: Expires is %v after the admission started; want at least the hold, %v", account, adm.Expires.Sub(before), req.Hold)
		}
		marker, err := client.Get(context.Background(), "test/inflight/"+string(req.Resource))
		if err != nil || len(marker.Kvs) != 1 {
			t.Fatalf("%s: marker: %v, %v", account, marker, err)
		}
		ttl, err := client.TimeToLive(context.Background(), clientv3.LeaseID(marker.Kvs[0].Lease))
		if err != nil {
			t.Fatal(err)
		}
		if left := time.Until(adm.Expires); left > time.Duration(ttl.TTL)*time.Second {
			t.Fatalf("%s: Expires is %v away, the marker's lease %ds: want the lease to live at least until Expires", account, left, ttl.TTL)
		}
		mustFinish(t, adm, nil)
	}
}
