package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunS3APICell runs the S3 API cell and its direct-sdk cell (64
// writers, 1 KiB) against the real stack: both answer without errors,
// the S3 API's writes went through its own gateway (whose CPU is
// measured), and the summary has s3api_c64_ratio_vs_direct_sdk.
func TestRunS3APICell(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fencegate")
	if out, err := exec.Command("go", "build", "-o", bin, "fencegate/cmd/fencegate").CombinedOutput(); err != nil {
		t.Fatalf("go build fencegate: %v\n%s", err, out)
	}
	cfg, err := parseFlags([]string{
		"--fencegate", bin, "--dir", t.TempDir(), "--json",
		"--modes", "direct-sdk,s3api", "--patterns", "distinct", "--sizes", "1KiB", "--concurrency", "64",
		"--rounds", "1", "--duration", "400ms", "--warmup", "20ms", "--upload-bytes", "0",
	}, &bytes.Buffer{})
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
	if len(rep.Cells) != 2 {
		t.Fatalf("%d cells; want direct-sdk and s3api: %+v", len(rep.Cells), rep.Cells)
	}
	for _, c := range rep.Cells {
		if c.OK == 0 || c.Errors != 0 {
			t.Errorf("%s: %d ok, %d errors (%s); want answers and no errors", c.Mode, c.OK, c.Errors, c.FirstError)
		}
		if c.Mode == modeS3API && c.CPUPer1000.Gateway == nil {
			t.Errorf("s3api: no gateway CPU; want its gateway's")
		}
	}
	if rep.Summary.S3APIC64RatioVsDirectSDK == nil || !strings.Contains(rep.SummaryLine, "s3api_c64_ratio_vs_direct_sdk=") {
		t.Errorf("summary %q; want s3api_c64_ratio_vs_direct_sdk", rep.SummaryLine)
	}
}
