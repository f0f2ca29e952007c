package main

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"fencegate/api"
	"fencegate/internal/testenv"
	"fencegate/tokenstore"
)

// TestWriteToken: in the raise pattern each of a worker's writes carries
// a new token, one above its last, in the gateway's header as in the
// client-side peer's check; elsewhere every write carries benchToken.
func TestWriteToken(t *testing.T) {
	w, h := &worker{}, &worker{}
	next, header := writeToken(patternRaise), writeTokenHeader(patternRaise)
	for want := api.Token(1); want <= 3; want++ {
		if got := next(w); got != want {
			t.Errorf("raise: token %d; want %d", got, want)
		}
		if got := header(h); got != want.String() {
			t.Errorf("raise: header %q; want %q", got, want.String())
		}
	}
	for _, p := range []string{patternDistinct, patternHot} {
		if got, hdr := writeToken(p)(w), writeTokenHeader(p)(w); got != benchToken || hdr != benchToken.String() {
			t.Errorf("%s: token %d, header %q; want %d", p, got, hdr, benchToken)
		}
	}
}

// TestStoreRaise: the store-raise cells' operation raises the worker's
// mark with each call, with and without group commit, and every raise is
// accepted.
func TestStoreRaise(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	for _, disable := range []bool{false, true} {
		t.Run(fmt.Sprintf("DisableGroupCommit=%v", disable), func(t *testing.T) {
			fences, err := tokenstore.New(etcd.Client(t), tokenstore.Config{Prefix: fmt.Sprintf("t%v/", disable), DisableGroupCommit: disable})
			if err != nil {
				t.Fatal(err)
			}
			op := storeRaise(fences, "b")
			const workers, writes = 16, 5
			var wg sync.WaitGroup
			for i := range workers {
				wg.Go(func() {
					w := &worker{id: i, key: fmt.Sprint("w", i)}
					for range writes {
						if o, err := op(context.Background(), w); o != outcomeOK || err != nil {
							t.Errorf("worker %d: outcome %v, %v; want ok", i, o, err)
							return
						}
					}
				})
			}
			wg.Wait()
			for i := range workers {
				if hwm, err := fences.HighWaterMark(context.Background(), api.ObjectResource("b", fmt.Sprint("w", i))); err != nil || hwm != writes {
					t.Errorf("worker %d's mark = %d, %v; want %d", i, hwm, err, writes)
				}
			}
		})
	}
}
