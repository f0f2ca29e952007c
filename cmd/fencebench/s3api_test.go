package main

import (
	"strings"
	"testing"
)

// TestRunS3APICell runs the S3 API cell and its direct-sdk cell (64
// writers, 1 KiB) against the real stack: both answer without errors,
// the S3 API's writes went through its own gateway (whose CPU is
// measured), and the summary has s3api_c64_ratio_vs_direct_sdk.
func TestRunS3APICell(t *testing.T) {
	rep := runReport(t, "--modes", "direct-sdk,s3api", "--patterns", "distinct", "--sizes", "1KiB", "--concurrency", "64",
		"--rounds", "1", "--duration", "400ms", "--warmup", "20ms", "--upload-bytes", "0")
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
