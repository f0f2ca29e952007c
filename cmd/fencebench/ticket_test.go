package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"fencegate/api"
	"fencegate/internal/devstack"
)

// TestRunTicketCells runs the ticket cells beside direct-sdk against real
// etcd, a versitygw of the test's own and a fencegate built from this
// repository: the raise shape at 64 writers, 1 KiB, and the large shape,
// here with 4 MiB bodies (its ratio has a floor, which a short run on a
// shared machine would not measure well enough to judge). The ticket
// writes must land in the store, each object with the token
// of a later write than its first (a new, larger token each write, read
// back with minio-go, a client the bench does not use), and the gateway
// must have read less than 1 KiB of requests per write: a ticket mode
// that wrote through the gateway would send it every body, and one that
// wrote nothing would leave no objects.
func TestRunTicketCells(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := devstack.StartVersityGW(ctx, devstack.S3Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	const bucket, rounds, large = "tickets", 2, 4 << 20
	rep := runReport(t, "--s3-endpoint", srv.Endpoint(), "--bucket", bucket,
		"--modes", "direct-sdk,ticket", "--patterns", "raise", "--sizes", "1KiB", "--concurrency", "64", "--ticket-large-bytes", "4MiB",
		"--rounds", strconv.Itoa(rounds), "--duration", "400ms", "--warmup", "20ms", "--retry-disturbed", "0",
		"--upload-bytes", "0", "--large-upload-bytes", "0")

	want := []cell{
		{modeDirectSDK, patternRaise, 1 << 10, 64}, {modeTicket, patternRaise, 1 << 10, 64},
		{modeDirectSDK, patternRaise, large, ticketLargeConcurrency}, {modeTicket, patternRaise, large, ticketLargeConcurrency},
	}
	if len(rep.Cells) != len(want) {
		t.Fatalf("%d cells; want %v: %+v", len(rep.Cells), want, rep.Cells)
	}
	for i, c := range rep.Cells {
		name := cell{c.Mode, c.Pattern, c.SizeBytes, c.Concurrency}
		if name != want[i] {
			t.Errorf("cell %d is %v; want %v", i, name, want[i])
		}
		if c.OK == 0 || c.Errors != 0 {
			t.Errorf("%v: %d ok, %d errors (%s); want answers and no errors", name, c.OK, c.Errors, c.FirstError)
		}
		if c.SizeBytes == large && c.Seconds < ticketLargeWindows*0.4 {
			t.Errorf("%v: windows of %.3fs in all; want %d times --duration", name, c.Seconds, ticketLargeWindows)
		}
		if c.Mode != modeTicket {
			if c.GatewayBytesPerWrite != nil {
				t.Errorf("%v: gateway bytes per write %v; want none (no gateway)", name, *c.GatewayBytesPerWrite)
			}
			continue
		}
		if c.CPUPer1000.Gateway == nil || c.RatioVsDirectSDK == nil {
			t.Errorf("%v: gateway CPU %v, vs direct-sdk %v; want both", name, c.CPUPer1000.Gateway, c.RatioVsDirectSDK)
		}
		// A ticket's request is a request line, a few headers and
		// {"size":N}: some hundred bytes. A body through the gateway
		// would be at least its size.
		if b := c.GatewayBytesPerWrite; b == nil || *b < 50 || *b >= 1024 {
			t.Errorf("%v: gateway read %s bytes per write; want counted, and 50 to 1023", name, format(b, 0))
		}
	}
	for _, field := range []string{"ticket_c64_ratio_vs_direct_sdk", "ticket_gw_bytes_per_write"} {
		if !strings.Contains(rep.SummaryLine, " "+field+"=") || strings.Contains(rep.SummaryLine, " "+field+"=n/a") {
			t.Errorf("summary %q; want %s with a figure", rep.SummaryLine, field)
		}
	}

	// The 1 KiB cell's objects are kept (the large cell's are deleted):
	// a key per writer in each round.
	mc, err := minio.New(strings.TrimPrefix(srv.Endpoint(), "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, ""), Region: srv.Region,
	})
	if err != nil {
		t.Fatal(err)
	}
	var landed int
	for obj := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		if !strings.Contains(obj.Key, "/"+modeTicket+"/"+patternRaise+"/1KiB/c64/") {
			continue
		}
		landed++
		info, err := mc.StatObject(ctx, bucket, obj.Key, minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		token, err := api.ParseToken(info.UserMetadata["Fence-Token"])
		if info.Size != 1<<10 || err != nil || token < 2 {
			t.Errorf("%s: %d bytes, token %q; want 1024 bytes and a token above the first write's (1)", obj.Key, info.Size, info.UserMetadata["Fence-Token"])
		}
	}
	if landed < 64*rounds {
		t.Errorf("%d objects of the ticket cell in the store; want a key per writer and round, %d", landed, 64*rounds)
	}
}

// TestTicketVerdicts: a run fails when the 64 MiB cell's ratio is under
// its floor or the gateway read a kilobyte or more per ticket write, and
// passes at the floors' good sides.
func TestTicketVerdicts(t *testing.T) {
	tests := []struct {
		name        string
		ratio       float64
		bytes       float64
		wantFailure string
	}{
		{"within", 0.95, 240, ""},
		{"ratio at the floor", 0.9, 1023, ""},
		{"ratio under the floor", 0.85, 240, "ticket_64mib_ratio_vs_direct_sdk=0.85"},
		{"a kilobyte through the gateway", 0.95, 1024, "ticket_gw_bytes_per_write=1024"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &report{Cells: []cellResult{
				{Mode: modeDirectSDK, Pattern: patternRaise, SizeBytes: ticketLargeBytes, Concurrency: ticketLargeConcurrency, RPS: 10},
				{Mode: modeTicket, Pattern: patternRaise, SizeBytes: ticketLargeBytes, Concurrency: ticketLargeConcurrency, RPS: 10 * tt.ratio, OK: 100,
					GatewayBytesPerWrite: ptr(tt.bytes)},
			}}
			r.finish(config{staleSummaryC: 4})
			err := r.failures()
			switch {
			case tt.wantFailure == "" && err != nil:
				t.Errorf("failures() = %v; want none", err)
			case tt.wantFailure != "" && (err == nil || !strings.Contains(err.Error(), tt.wantFailure)):
				t.Errorf("failures() = %v; want one naming %s", err, tt.wantFailure)
			}
		})
	}
}
