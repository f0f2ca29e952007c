package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain lets run start etcd as it does in fencebench: by running this
// program (here, the test binary) as `etcd-server`.
func TestMain(m *testing.M) {
	etcdServerMain(os.Args[1:])
	os.Exit(m.Run())
}

// TestRunEndToEnd runs a small set against the real stack fencebench
// starts (etcd as a child process, versitygw, fencegate built from this
// repository), in two rounds, and reads the JSON report: every cell was
// measured and answered, the rounds' windows add up to the duration, the
// gateway's figures are there, and the stale cell reached neither etcd
// nor S3.
func TestRunEndToEnd(t *testing.T) {
	const duration = 400 * time.Millisecond
	rep := runReport(t, "--modes", "direct,clientside,gateway,stale", "--patterns", "distinct", "--sizes", "1KiB", "--concurrency", "4",
		"--rounds", "2", "--duration", duration.String(), "--warmup", "20ms", "--upload-bytes", "1MiB", "--large-upload-bytes", "0")
	if rep.Config.Rounds != 2 {
		t.Errorf("config rounds %d; want 2", rep.Config.Rounds)
	}
	if len(rep.Cells) != 4 {
		t.Fatalf("%d cells; want 4: %+v", len(rep.Cells), rep.Cells)
	}
	for _, c := range rep.Cells {
		name := cell{c.Mode, c.Pattern, c.SizeBytes, c.Concurrency}.String()
		if c.OK == 0 || c.Errors != 0 {
			t.Errorf("%s: %d ok, %d errors (%s); want answers and no errors", name, c.OK, c.Errors, c.FirstError)
		}
		if c.Seconds < duration.Seconds() {
			t.Errorf("%s: windows of %.3fs in all; want at least %v", name, c.Seconds, duration)
		}
		if c.CPUPer1000.S3 == nil || c.CPUPer1000.Bench == nil || c.OtherCores == nil {
			t.Errorf("%s: CPU of S3 %v, of the load %v, other %v; want all measured", name, c.CPUPer1000.S3, c.CPUPer1000.Bench, c.OtherCores)
		}
		switch c.Mode {
		case modeGateway:
			if c.CPUPer1000.Gateway == nil || c.RatioVsDirect == nil || c.RatioVsClientSide == nil {
				t.Errorf("%s: gateway CPU %v, vs direct %v, vs client-side %v; want all", name, c.CPUPer1000.Gateway, c.RatioVsDirect, c.RatioVsClientSide)
			}
			if c.EtcdRequestsPerOp == nil || *c.EtcdRequestsPerOp <= 0 {
				t.Errorf("%s: etcd requests per write %v; want some", name, c.EtcdRequestsPerOp)
			}
		case modeStale:
			if c.StaleEtcdRequests == nil || *c.StaleEtcdRequests != 0 || c.StaleS3Requests == nil || *c.StaleS3Requests != 0 {
				t.Errorf("%s: etcd requests %v, S3 requests %v; want counted, and 0 and 0", name, c.StaleEtcdRequests, c.StaleS3Requests)
			}
		}
	}
	if len(rep.Uploads) != 1 || rep.Uploads[0].Status != 201 || rep.Uploads[0].Bytes != 1<<20 {
		t.Errorf("uploads %+v; want one of 1 MiB, answered 201", rep.Uploads)
	}
}

// TestRunGCSCells runs the GCS cells end to end: fake-gcs-server, direct
// conditional writes to it, and a gateway whose config maps the bucket to
// it; both cells get answers and no errors, and the summary line has the
// gateway's ratio over direct.
func TestRunGCSCells(t *testing.T) {
	rep := runReport(t, "--modes", "gcs-direct,gcs-gateway", "--rounds", "2", "--duration", "400ms", "--warmup", "20ms", "--upload-bytes", "0", "--large-upload-bytes", "0")
	if len(rep.Cells) != 2 || rep.Cells[0].Mode != modeGCSDirect || rep.Cells[1].Mode != modeGCSGateway {
		t.Fatalf("cells %+v; want gcs-direct and gcs-gateway", rep.Cells)
	}
	for _, c := range rep.Cells {
		if c.OK == 0 || c.Errors != 0 || c.Concurrency != 64 || c.SizeBytes != 1<<10 {
			t.Errorf("%s c%d %dB: %d ok, %d errors (%s); want answers at c64, 1 KiB, and no errors", c.Mode, c.Concurrency, c.SizeBytes, c.OK, c.Errors, c.FirstError)
		}
		if c.CPUPer1000.S3 == nil || *c.CPUPer1000.S3 <= 0 {
			t.Errorf("%s: store CPU per 1,000 writes %v; want fake-gcs-server's, measured", c.Mode, c.CPUPer1000.S3)
		}
	}
	if rep.Summary.GCSC64RatioVsDirect == nil || !strings.Contains(rep.SummaryLine, "gcs_c64_ratio_vs_direct=") ||
		strings.Contains(rep.SummaryLine, "gcs_c64_ratio_vs_direct=n/a") {
		t.Errorf("summary %q; want gcs_c64_ratio_vs_direct with a figure", rep.SummaryLine)
	}
}

// runReport runs fencebench with args against the real stack it starts
// (etcd as a child process, versitygw, a fencegate built from this
// repository, in a directory of the test's), with --json, and returns the
// report.
func runReport(t *testing.T, args ...string) report {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fencegate")
	if out, err := exec.Command("go", "build", "-o", bin, "fencegate/cmd/fencegate").CombinedOutput(); err != nil {
		t.Fatalf("go build fencegate: %v\n%s", err, out)
	}
	cfg, err := parseFlags(append([]string{"--fencegate", bin, "--dir", t.TempDir(), "--json"}, args...), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if err := run(ctx, cfg, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	var rep report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, stdout.String())
	}
	return rep
}
