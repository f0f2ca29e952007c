package main

import (
	"strings"
	"testing"
)

// TestRunS3APICell runs the S3 API cell with its direct-sdk and REST
// gateway cells (64 writers, 1 KiB) against the real stack: all answer
// without errors, the S3 API's writes went through its own gateway (whose
// CPU is measured), and the summary has s3api_c64_ratio_vs_direct_sdk,
// the S3 API gateway's CPU per write and its ratio to the REST API's; and
// the paced REST and S3 API cells that follow are offered the same rate.
func TestRunS3APICell(t *testing.T) {
	rep := runReport(t, "--modes", "direct-sdk,gateway,s3api", "--patterns", "distinct", "--sizes", "1KiB", "--concurrency", "64",
		"--rounds", "2", "--duration", "400ms", "--warmup", "20ms", "--upload-bytes", "0", "--large-upload-bytes", "0")
	if len(rep.Cells) != 5 {
		t.Fatalf("%d cells; want direct-sdk, gateway and s3api, and the paced gateway and s3api: %+v", len(rep.Cells), rep.Cells)
	}
	for _, c := range rep.Cells {
		if c.OK == 0 || c.Errors != 0 {
			t.Errorf("%s: %d ok, %d errors (%s); want answers and no errors", c.Mode, c.OK, c.Errors, c.FirstError)
		}
		if c.Mode == modeS3API && c.CPUPer1000.Gateway == nil {
			t.Errorf("s3api: no gateway CPU; want its gateway's")
		}
	}
	for _, field := range []string{"s3api_c64_ratio_vs_direct_sdk", "s3api_gw_cpu_ms_per_write", "s3api_cpu_ratio_vs_rest"} {
		if !strings.Contains(rep.SummaryLine, " "+field+"=") || strings.Contains(rep.SummaryLine, " "+field+"=n/a") {
			t.Errorf("summary %q; want %s with a figure", rep.SummaryLine, field)
		}
	}
	// The paced cells: their load never exceeds the rate offered (the
	// pacer makes up no backlog; the bound leaves room for the writes
	// under way when the window opened), and the paced ratio is there
	// exactly when both served the rate. A loaded machine may serve
	// less; it never serves more.
	paced := 0
	for _, c := range rep.Cells {
		if c.Pattern != patternPaced {
			continue
		}
		paced++
		if c.OfferedRate != s3APIPacedRate || c.RPS > 1.5*s3APIPacedRate {
			t.Errorf("%s paced: offered %v, served %.0f writes/s; want %d offered and no more served", c.Mode, c.OfferedRate, c.RPS, s3APIPacedRate)
		}
	}
	door, rest := rep.Cells[3], rep.Cells[4]
	if door.Mode == modeGateway {
		door, rest = rest, door
	}
	if paced != 2 || door.Mode != modeS3API || rest.Mode != modeGateway {
		t.Fatalf("cells %+v; want the paced s3api and gateway last", rep.Cells)
	}
	if bothKeptUp := door.keptUp() && rest.keptUp(); bothKeptUp != (rep.Summary.S3APIPacedCPURatioVsREST != nil) {
		t.Errorf("paced cells served %.0f and %.0f of %d writes/s, paced ratio %v; want a ratio exactly when both kept up",
			door.RPS, rest.RPS, s3APIPacedRate, rep.Summary.S3APIPacedCPURatioVsREST)
	}
	if rep.Summary.S3APIC64RatioVsDirectSDK == nil || rep.Summary.S3APIGatewayCPUMsPerWrite == nil || rep.Summary.S3APICPURatioVsREST == nil {
		t.Errorf("summary %+v; want the S3 API's ratio, CPU per write and CPU ratio", rep.Summary)
	}
}
