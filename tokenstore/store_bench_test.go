package tokenstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"fencegate/api"
	"fencegate/internal/testenv"
)

// BenchmarkFenceCheck is the fence-check transaction on a real embedded
// etcd (testenv's: one member, no fsync, so that the figure is the
// client's and etcd's work rather than the disk's), accepted writes of
// one lock holder, on one resource or a resource per goroutine.
func BenchmarkFenceCheck(b *testing.B) {
	etcd := testenv.StartEtcd(b)
	s := newStore(b, etcd.Client(b))
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := s.FenceCheck(ctx, "s3/bench/serial", 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel-distinct", func(b *testing.B) {
		var n atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			r := api.Resource(fmt.Sprintf("s3/bench/p%d", n.Add(1)))
			for pb.Next() {
				if err := s.FenceCheck(ctx, r, 1); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("stale", func(b *testing.B) {
		if err := s.FenceCheck(ctx, "s3/bench/stale", 10); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := s.FenceCheck(ctx, "s3/bench/stale", 5); err == nil {
				b.Fatal("stale token accepted")
			}
		}
	})
}

// BenchmarkCachedHighWaterMark is the fast reject's lookup: what a stale
// refusal costs the store, without a round trip.
func BenchmarkCachedHighWaterMark(b *testing.B) {
	etcd := testenv.StartEtcd(b)
	s := newStore(b, etcd.Client(b))
	if err := s.FenceCheck(context.Background(), "s3/bench/k", 10); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if hwm, ok := s.CachedHighWaterMark("s3/bench/k"); !ok || hwm != 10 {
				b.Errorf("CachedHighWaterMark = %d, %v", hwm, ok)
				return
			}
		}
	})
}
