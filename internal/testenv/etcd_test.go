package testenv_test

import (
	"context"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"fencegate/internal/testenv"
)

func TestEtcdStopRestart(t *testing.T) {
	e := testenv.StartEtcd(t)
	endpoints := e.Endpoints()
	before := e.Client(t)

	mustPut(t, before, "k", "v1")
	if got := mustGet(t, before, "k"); got != "v1" {
		t.Fatalf("Get(k) = %q; want %q", got, "v1")
	}

	e.Stop(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	_, err := before.Get(ctx, "k")
	cancel()
	if err == nil {
		t.Fatal("Get(k) after Stop = nil error; want an error")
	}

	e.Restart(t)
	if got := e.Endpoints(); !slices.Equal(got, endpoints) {
		t.Fatalf("Endpoints() after Restart = %v; want %v", got, endpoints)
	}
	if got := mustGet(t, e.Client(t), "k"); got != "v1" {
		t.Fatalf("Get(k) with a new client after Restart = %q; want %q", got, "v1")
	}
	// A client made before Stop reconnects on its own.
	if got := mustGet(t, before, "k"); got != "v1" {
		t.Fatalf("Get(k) with the old client after Restart = %q; want %q", got, "v1")
	}
	mustPut(t, before, "k", "v2")
	if got := mustGet(t, before, "k"); got != "v2" {
		t.Fatalf("Get(k) = %q; want %q", got, "v2")
	}
}

func TestEtcdClientWhileStopped(t *testing.T) {
	e := testenv.StartEtcd(t)
	e.Stop(t)
	e.Stop(t) // stopping twice is a no-op
	c := e.Client(t)
	e.Restart(t)
	mustPut(t, c, "k", "v")
	if got := mustGet(t, c, "k"); got != "v" {
		t.Fatalf("Get(k) = %q; want %q", got, "v")
	}
}

func TestEtcdInstancesAreIndependent(t *testing.T) {
	t.Parallel()
	a, b := testenv.StartEtcd(t), testenv.StartEtcd(t)
	if slices.Equal(a.Endpoints(), b.Endpoints()) {
		t.Fatalf("two servers share endpoints %v", a.Endpoints())
	}
	mustPut(t, a.Client(t), "k", "a")
	resp, err := b.Client(t).Get(t.Context(), "k")
	if err != nil {
		t.Fatalf("Get(k) on b: %v", err)
	}
	if len(resp.Kvs) != 0 {
		t.Fatalf("Get(k) on b = %q; want no key", resp.Kvs[0].Value)
	}
}

func TestCountingClient(t *testing.T) {
	e := testenv.StartEtcd(t)
	c, calls := e.CountingClient(t)
	other := e.Client(t)
	steps := []struct {
		name string
		do   func(ctx context.Context) error // nil: stay idle a moment
		want int64                           // Count() after the step
	}{
		{name: "idle", want: 0},
		{name: "get", want: 1, do: func(ctx context.Context) error {
			_, err := c.Get(ctx, "k")
			return err
		}},
		{name: "txn", want: 2, do: func(ctx context.Context) error {
			resp, err := c.Txn(ctx).
				If(clientv3.Compare(clientv3.Version("k"), "=", 0)).
				Then(clientv3.OpPut("k", "v")).
				Else(clientv3.OpGet("k")).
				Commit()
			if err == nil && !resp.Succeeded {
				t.Errorf("Txn(create k) did not succeed")
			}
			return err
		}},
		{name: "another client", want: 2, do: func(ctx context.Context) error {
			_, err := other.Get(ctx, "k")
			return err
		}},
		{name: "idle again", want: 2},
	}
	for _, step := range steps {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		if step.do == nil {
			time.Sleep(200 * time.Millisecond)
		} else if err := step.do(ctx); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		cancel()
		if got := calls.Count(); got != step.want {
			t.Fatalf("Count() after %s = %d; want %d", step.name, got, step.want)
		}
	}
}

func mustPut(tb testing.TB, c *clientv3.Client, key, value string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, key, value); err != nil {
		tb.Fatalf("Put(%q, %q): %v", key, value, err)
	}
}

func mustGet(tb testing.TB, c *clientv3.Client, key string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, key)
	if err != nil {
		tb.Fatalf("Get(%q): %v", key, err)
	}
	if len(resp.Kvs) != 1 {
		tb.Fatalf("Get(%q) returned %d keys; want 1", key, len(resp.Kvs))
	}
	return string(resp.Kvs[0].Value)
}
