package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFootprintShort is make soak-footprint in short: for 60 seconds, 32
// writers put, delete and stale-write a rotating set of 4,000 objects
// through a fencegate built from this repository, in front of an etcd
// with a 16 MiB quota and periodic auto-compaction every second, and
// versitygw on disk. It checks the run's verdict (no NOSPACE alarm, the
// size levelled off, every stale write refused with 409, every other
// write answered as it must be) and that the run did what the verdict
// needs: deletes of objects that were there and of objects that were
// not, stale writes, compactions during the run, the whole set written,
// a line every 10 seconds, and one etcd revision per raise of a
// mark and none for anything else. etcd runs without fsync, which changes
// its speed, not its size. The set is smaller than make soak-footprint's
// so that a machine busy with other packages' tests still writes every
// object early enough for the verdict (3 retentions before the last
// third): 4,000 objects need 108 writes a second; here, alone, the race
// detector's build wrote 400 a second, and 150 while the machine was
// loaded.
func TestFootprintShort(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fencegate")
	if out, err := exec.Command("go", "build", "-o", bin, "fencegate/cmd/fencegate").CombinedOutput(); err != nil {
		t.Fatalf("go build fencegate: %v\n%s", err, out)
	}
	cfg, err := parseFootprintFlags([]string{
		"--fencegate", bin, "--dir", t.TempDir(),
		"--duration", "60s", "--quota", "16MiB", "--objects", "4000", "--etcd-unsafe-no-fsync",
	}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.compactionRetention != time.Second {
		t.Fatalf("compaction retention %v; want 1s (a sixtieth of the duration)", cfg.compactionRetention)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	res, err := runFootprint(ctx, cfg, &stdout, &stderr)
	if err != nil {
		t.Fatalf("runFootprint: %v\nstderr:\n%s", err, stderr.String())
	}
	t.Logf("output:\n%s", stdout.String())
	for _, f := range res.failures() {
		t.Errorf("verdict: %s", f)
	}
	if !strings.Contains(stdout.String(), "footprint: verdict=ok ") {
		t.Errorf("no summary line with verdict=ok in the output")
	}
	if n := strings.Count(stdout.String(), "footprint: t="); n < 5 {
		t.Errorf("%d size lines in the output; want one every 10s", n)
	}
	if res.DeletesAbsent == 0 || res.DeletesExisting == 0 || res.StaleRefused == 0 {
		t.Errorf("deletes of existing objects %d, of absent ones %d, stale writes refused %d; want some of each", res.DeletesExisting, res.DeletesAbsent, res.StaleRefused)
	}
	if res.CoveredAt == 0 {
		t.Errorf("the writers never gave every object a mark")
	}
	last := res.Samples[len(res.Samples)-1]
	if last.CompactRevision <= res.StartRevision {
		t.Errorf("etcd compacted up to revision %d, the run started at %d; want compactions during the run", last.CompactRevision, res.StartRevision)
	}
	if last.Keys < int64(cfg.objects) {
		t.Errorf("etcd has %d keys; want at least one per object, %d", last.Keys, cfg.objects)
	}
	// Stale writes and deletes of absent objects write nothing to etcd:
	// it puts one key per raise of a mark. (Its revisions may be fewer:
	// the gateway's group commit raises several marks in one.)
	if puts, raises := last.Puts-res.Samples[0].Puts, res.raises(); puts < raises || puts > raises+raises/100 {
		t.Errorf("etcd put %d keys for %d raises of a mark; want one each", puts, raises)
	}
	if revisions := last.Revision - res.StartRevision; revisions > res.raises()+res.raises()/100 {
		t.Errorf("%d etcd revisions for %d raises of a mark; want at most one each", revisions, res.raises())
	}
}

// TestJudgeLevelOff checks the verdict on a run's sizes: flat or growing
// by at most 10% (or 128 KiB, for a small database) after the first
// third levels off; growing by as much in
// every third, as without compaction, does not; nor can a run be judged
// without samples in the middle and last thirds, or before the whole set
// has its keys.
func TestJudgeLevelOff(t *testing.T) {
	const d = 90 * time.Second
	series := func(sizes ...int64) []etcdSample { // MiB, one sample every 10s
		var out []etcdSample
		for i, s := range sizes {
			out = append(out, etcdSample{At: time.Duration(i) * 10 * time.Second, DBSize: s << 20})
		}
		return out
	}
	small := func(sizes ...int64) []etcdSample { // KiB, one sample every 10s
		out := series(sizes...)
		for i := range out {
			out[i].DBSize >>= 10
		}
		return out
	}
	tests := []struct {
		name    string
		samples []etcdSample
		covered time.Duration
		wantOK  bool
		reason  string
	}{
		{"flat after a first-third climb", series(0, 50, 100, 100, 100, 100, 100, 100, 100, 100), 5 * time.Second, true, ""},
		{"10% more in the last third", series(0, 50, 100, 100, 100, 100, 105, 110, 110, 110), 5 * time.Second, true, ""},
		{"11% more in the last third", series(0, 50, 100, 100, 100, 100, 105, 111, 111, 111), 5 * time.Second, false, "11.0% above"},
		{"linear growth, no compaction", series(100, 110, 120, 130, 140, 150, 160, 170, 180, 190), 5 * time.Second, false, "above the middle third's"},
		{"no sample in the last third", series(0, 50, 100, 100, 100), 5 * time.Second, false, "0 in the last"},
		{"a small database, 11% but 70 KiB more", small(0, 300, 630, 630, 630, 630, 680, 700, 700, 700), 5 * time.Second, true, ""},
		{"a small database, 129 KiB more", small(0, 300, 630, 630, 630, 630, 700, 759, 759, 759), 5 * time.Second, false, "or 128 KiB"},
		{"set covered in the middle third, 3 retentions before the last", series(0, 50, 100, 100, 100, 100, 100, 100, 100, 100), 45 * time.Second, true, ""},
		{"set covered too late for 3 retentions before the last third", series(0, 50, 100, 100, 100, 100, 100, 100, 100, 100), 46 * time.Second, false, "cannot judge"},
		{"set never covered", series(0, 50, 100, 100, 100, 100, 100, 100, 100, 100), 0, false, "never gave every object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := judgeLevelOff(tt.samples, tt.covered, 5*time.Second, d)
			if got.OK != tt.wantOK || !strings.Contains(got.Reason, tt.reason) {
				t.Errorf("judgeLevelOff = %+v; want OK %v, reason containing %q", got, tt.wantOK, tt.reason)
			}
		})
	}
}

// TestParseFootprintFlags checks the defaults (make soak-footprint's run)
// and that a retention too long to judge the size is refused.
func TestParseFootprintFlags(t *testing.T) {
	cfg, err := parseFootprintFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.duration != 10*time.Minute || cfg.quotaBytes != 64<<20 || cfg.objects != 100000 || cfg.compactionRetention != 10*time.Second {
		t.Errorf("defaults: duration %v, quota %d, objects %d, retention %v; want 10m, 64 MiB, 100000, 10s", cfg.duration, cfg.quotaBytes, cfg.objects, cfg.compactionRetention)
	}
	if _, err := parseFootprintFlags([]string{"--duration", "60s", "--compaction-retention", "11s"}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "sixth") {
		t.Errorf("a retention of 11s for 60s: error %v; want one about a sixth of the duration", err)
	}
	cfg, err = parseFootprintFlags([]string{"--duration", "60s", "--compaction-retention", "-1s"}, &bytes.Buffer{})
	if err != nil || cfg.compactionRetention >= 0 {
		t.Errorf("retention -1s (off): %v, %v; want accepted, negative", cfg.compactionRetention, err)
	}
}
