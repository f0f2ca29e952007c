package robustness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"fencegate/api"
)

// The ETag-less shape. versitygw's posix backend keeps an object's ETag in
// an extended attribute that only its own writes set, so a file placed in
// the bucket's directory by other means is an object without an ETag: its
// HEAD answers none. A gateway that observes it has no version to make its
// PUT conditional on (an If-Match of "" is no condition at all), so the
// only safe answer is to refuse the write; a write sent anyway is blind,
// and a stale writer held between its fence check and its PUT lands on top
// of a newer holder's version.

// PlaceEtagless places the ETag-less objects of the history in the bucket's
// directory, each a file whose body names a seed operation, and records
// them in the history as seeds. Call it before Run.
func (w *Workload) PlaceEtagless() error {
	for i, key := range w.EtaglessKeys() {
		id := fmt.Sprintf("%sseed-%d", strings.ReplaceAll(w.prefix, "/", "-"), i+1)
		path := filepath.Join(w.cluster.BucketDir(), filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("place %s: %w", key, err)
		}
		if err := os.WriteFile(path, []byte("op="+id+" placed in the bucket directory, no ETag\n"), 0o644); err != nil {
			return fmt.Errorf("place %s: %w", key, err)
		}
		w.history.Seed(key, id)
	}
	return nil
}

// EtaglessHeld returns how many opening races held their first write.
func (w *Workload) EtaglessHeld() int {
	w.leaseMu.Lock()
	defer w.leaseMu.Unlock()
	return w.etaglessHeld
}

// etaglessRace opens an ETag-less object with the race that a blind write
// loses: writer A takes the object's lock and writes (or, half the time,
// deletes) through one gateway,
// whose pause-after-fence hook holds A's write after its fence check;
// meanwhile A's lease is revoked, writer B takes the lock (a larger token)
// and writes through another gateway, and once B is answered A's write
// goes on. A gateway that sends either request to S3 with an empty
// If-Match lets A's smaller token land on top of B's version (or delete
// it); one that refuses to change objects without an ETag answers both 502
// and changes nothing.
// clientID and clientID+1 name the two writers.
func (w *Workload) etaglessRace(ctx context.Context, key string, clientID int, rnd *rand.Rand) {
	gateways := rnd.Perm(len(w.cluster.Gateways))
	first, second := w.cluster.Gateways[gateways[0]], w.cluster.Gateways[gateways[len(gateways)-1]]
	writerA := &clientState{id: clientID, process: w.history.NewProcess(), rnd: rnd}
	writerB := &clientState{id: clientID + 1, process: w.history.NewProcess(), rnd: rnd}
	resource := api.ObjectResource(Bucket, key)

	lockCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	tokenA, releaseA, leaseA, err := w.lock(lockCtx, key)
	if err != nil {
		return // the lock service is down (a fault): the object joins the others as it is
	}
	first.Pause.ArmResource(resource, func(_ api.Resource, token api.Token, release <-chan struct{}) {
		w.leaseMu.Lock()
		w.etaglessHeld++
		w.leaseMu.Unlock()
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = w.cluster.Client.Revoke(rctx, leaseA)
		cancel()
		deadline := time.Now().Add(maxPause - 200*time.Millisecond)
		for time.Now().Before(deadline) && !w.history.AnsweredAbove(key, token) {
			select {
			case <-release:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	defer first.Pause.DisarmResource(resource)
	deleteA := rnd.IntN(2) == 0
	doneA := make(chan struct{})
	go func() {
		defer close(doneA)
		if deleteA {
			w.deleteVia(ctx, writerA, first, key, tokenA, true)
		} else {
			w.writeVia(ctx, writerA, first, key, tokenA, true, false)
		}
		releaseA() // if the write was not held, the lease is still there: B waits for it
	}()
	lockCtxB, cancelB := context.WithTimeout(ctx, 2*maxPause)
	defer cancelB()
	if tokenB, releaseB, _, err := w.lock(lockCtxB, key); err == nil {
		w.writeVia(ctx, writerB, second, key, tokenB, false, false)
		releaseB()
	}
	<-doneA
}
