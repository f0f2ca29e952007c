package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"fencegate/api"
	"fencegate/gateway"
)

// lockHolder is a client of the seed scenario: it takes an etcd lock
// (concurrency.Mutex on a leased session) and uses the lock key's create
// revision as its fencing token.
type lockHolder struct {
	session *concurrency.Session
	token   api.Token
}

func acquire(tb testing.TB, client *clientv3.Client, ttlSeconds int) *lockHolder {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	session, err := concurrency.NewSession(client, concurrency.WithTTL(ttlSeconds))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = session.Close() })
	mu := concurrency.NewMutex(session, "/locks/report")
	if err := mu.Lock(ctx); err != nil {
		tb.Fatal(err)
	}
	resp, err := client.Get(ctx, mu.Key())
	if err != nil || len(resp.Kvs) != 1 {
		tb.Fatalf("read lock key: %v", err)
	}
	return &lockHolder{session: session, token: api.Token(resp.Kvs[0].CreateRevision)}
}

// stall makes the holder stop renewing its lease, as a process stopped by
// a GC pause or a VM migration would: the lease expires after its TTL.
func (h *lockHolder) stall() { h.session.Orphan() }

// seedScenario runs the seed scenario (a lock holder stalls past its
// lease while a second holder writes) with times scaled down (TTL 2 s
// instead of 10 s): client 1 acquires, stalls past its TTL;
// client 2 acquires (a larger token) and writes; client 1 wakes up and
// writes. write is how each client writes; the scenario returns what S3
// holds in the end and client 1's status.
func seedScenario(t *testing.T, e *env, write func(token api.Token, body string) int) (body, token string, client1Status int) {
	t.Helper()
	etcd := e.etcd.Client(t)
	client1 := acquire(t, etcd, 2)
	client1.stall()
	client2 := acquire(t, etcd, 2) // blocks until client 1's lease expires
	if client2.token <= client1.token {
		t.Fatalf("client 2 token %d not above client 1 token %d", client2.token, client1.token)
	}
	if s := write(client2.token, "client 2's report"); s >= 300 {
		t.Fatalf("client 2's write: status %d", s)
	}
	client1Status = write(client1.token, "client 1's report")
	body, token, _ = e.stored(t, "report.csv")
	t.Logf("tokens: client 1 %d, client 2 %d; the store holds %q with fence-token %q", client1.token, client2.token, body, token)
	return body, token, client1Status
}

func TestSeedScenarioThroughGateway(t *testing.T) {
	for _, store := range objectStores {
		t.Run(store, func(t *testing.T) {
			e := newEnvOn(t, store, gateway.Config{})
			var token2 api.Token
			body, token, status1 := seedScenario(t, e, func(token api.Token, body string) int {
				if token2 == 0 {
					token2 = token
				}
				return e.put(t, "report.csv", token, body).status
			})
			if status1 != http.StatusConflict {
				t.Fatalf("client 1's stale write: status %d; want 409", status1)
			}
			if body != "client 2's report" || token != token2.String() {
				t.Fatalf("%s holds %q with fence-token %q; want client 2's report with %d", store, body, token, token2)
			}
		})
	}
}

// TestSeedScenarioDirectToS3 is the same scenario without fencegate, each
// client writing straight to S3 as a plain client would: client 1
// overwrites client 2. This is what the test above proves the gateway
// prevents.
func TestSeedScenarioDirectToS3(t *testing.T) {
	e := newEnv(t, gateway.Config{})
	body, _, status1 := seedScenario(t, e, func(token api.Token, body string) int {
		_, err := e.minio.PutObject(context.Background(), e.bucket, "report.csv",
			strings.NewReader(body), int64(len(body)), minio.PutObjectOptions{UserMetadata: map[string]string{api.MetadataFenceToken: token.String()}})
		if err != nil {
			t.Fatalf("direct PUT: %v", err)
		}
		return http.StatusOK
	})
	if status1 != http.StatusOK || body != "client 1's report" {
		t.Fatalf("direct to S3: client 1 got %d and S3 holds %q; want the overwrite by client 1", status1, body)
	}
}
