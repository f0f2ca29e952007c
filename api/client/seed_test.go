package client_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/api/client"
	"fencegate/internal/testenv"
)

// TestSeedScenarioWithLockAPI is the seed scenario (a stalled holder's
// late write refused) using nothing but fencegate's lock API and this SDK, times scaled down (TTL 2 s for
// 10 s): client 1 acquires and stalls (its keepalives stop, as a process
// paused by GC or a VM migration would); its session expires; client 2
// acquires with a larger token and writes; client 1 wakes up and writes
// with its old token and is refused as stale. S3, read with an independent
// client, holds client 2's bytes and token.
func TestSeedScenarioWithLockAPI(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	c1 := &client.Client{BaseURL: e.url}
	c2 := &client.Client{BaseURL: e.url, SessionTTL: 2 * time.Second}

	s1, err := c1.NewSession(ctx, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lock1, err := s1.Lock(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	s1.Orphan() // client 1 stalls: no more keepalives

	var token2 api.Token
	err = c2.WithLock(ctx, "report", func(ctx context.Context, token api.Token) error { // waits for the expiry
		token2 = token
		_, err := c2.PutObject(ctx, e.bucket, "report.csv", token, strings.NewReader("client 2's report"))
		return err
	})
	if err != nil {
		t.Fatalf("client 2: %v", err)
	}
	if token2 <= lock1.Token {
		t.Fatalf("client 2's token %d not above client 1's %d", token2, lock1.Token)
	}

	// Client 1 wakes up, still believing it holds the lock.
	_, err = c1.PutObject(ctx, e.bucket, "report.csv", lock1.Token, strings.NewReader("client 1's report"))
	var stale *api.StaleTokenError
	if !errors.Is(err, api.ErrStaleToken) || !errors.As(err, &stale) || stale.HighWaterMark != token2 {
		t.Fatalf("client 1's late write = %v; want stale with high-water mark %d", err, token2)
	}
	body, token, _ := e.stored(t, "report.csv")
	t.Logf("tokens: client 1 %d, client 2 %d; S3 holds %q with fence-token %s", lock1.Token, token2, body, token)
	if body != "client 2's report" || token != token2.String() {
		t.Fatalf("S3 holds %q with token %q; want client 2's report with %d", body, token, token2)
	}
	obj, err := c1.GetObject(ctx, e.bucket, "report.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	if b, _ := io.ReadAll(obj.Body); string(b) != "client 2's report" || obj.Token != token2 {
		t.Fatalf("GetObject = %q, token %d", b, obj.Token)
	}
}

// TestSeedScenarioHeldNobodyElse is the case plain fencing cannot catch,
// on a bucket under the "held" check: client 1's session expires while it
// stalls, nobody else acquires, and its late write is refused all the same
// (lock-not-held). The object keeps what client 1 wrote while it held the
// lock.
func TestSeedScenarioHeldNobodyElse(t *testing.T) {
	e := newEnv(t, heldBucket("report"))
	ctx := context.Background()
	c := &client.Client{BaseURL: e.url}
	s, err := c.NewSession(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Lock(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, e.bucket, "report.csv", l.Token, strings.NewReader("while held")); err != nil {
		t.Fatal(err)
	}
	s.Orphan()
	testenv.WaitUntil(t, 30*time.Second, "the session has expired and nobody else is queued", func() bool {
		st, err := c.LockState(ctx, "report")
		if err != nil {
			t.Fatal(err)
		}
		return st.QueueLength == 0
	})
	_, err = c.PutObject(ctx, e.bucket, "report.csv", l.Token, strings.NewReader("after expiry"))
	if !errors.Is(err, api.ErrLockNotHeld) {
		t.Fatalf("write after the session expired = %v; want ErrLockNotHeld", err)
	}
	if body, token, _ := e.stored(t, "report.csv"); body != "while held" || token != l.Token.String() {
		t.Fatalf("S3 holds %q with token %q; want the write made while held", body, token)
	}
}
