package tokenstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"fencegate/api"
	"fencegate/internal/testenv"
)

// noSpaceQuota is the database quota of the etcd that tests fill: small,
// so that a few hundred KiB of writes reach it.
const noSpaceQuota = 1 << 20

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
	testenv.FillUntilNoSpace(t, client)

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

	testenv.RecoverFromNoSpace(t, client, etcd.Endpoints())
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
