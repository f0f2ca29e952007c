package main

import (
	"bytes"
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBodyReadsAndRewinds: a body is the shared block with its own first
// bytes, and rewinds as SDKs expect of an io.ReadSeeker.
func TestBodyReadsAndRewinds(t *testing.T) {
	src := newBodySource(1 << 10)
	w := &worker{id: 3, body: src}
	b := w.nextBody()
	first, err := io.ReadAll(b)
	if err != nil || len(first) != 1<<10 {
		t.Fatalf("ReadAll = %d bytes, %v; want 1024", len(first), err)
	}
	if !bytes.Equal(first[prefixBytes:], src.base[prefixBytes:]) || bytes.Equal(first[:prefixBytes], src.base[:prefixBytes]) {
		t.Fatal("body is not the shared block with its own prefix")
	}
	if _, err := b.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	again, _ := io.ReadAll(io.LimitReader(b, 7))
	rest, _ := io.ReadAll(b)
	if !bytes.Equal(append(again, rest...), first) {
		t.Fatal("a rewound body reads differently")
	}
	if other, _ := io.ReadAll(w.nextBody()); bytes.Equal(other, first) {
		t.Fatal("two requests of one worker have the same body (and ETag)")
	}
}

func TestGeneratorLength(t *testing.T) {
	n, err := io.Copy(io.Discard, newGenerator(3<<20+5))
	if err != nil || n != 3<<20+5 {
		t.Fatalf("generator gave %d bytes, %v; want %d", n, err, 3<<20+5)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 1000; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		q    float64
		n    int
		want float64
	}{
		{0.5, 1000, 500}, {0.99, 1000, 990}, {0.999, 1000, 999}, {0.999, 999, math.NaN()}, {0.99, 100, 99},
	}
	for _, tt := range tests {
		got := percentile(d[:tt.n], tt.q)
		if !(got == tt.want || math.IsNaN(got) && math.IsNaN(tt.want)) {
			t.Errorf("percentile(%d samples, %v) = %v; want %v", tt.n, tt.q, got, tt.want)
		}
	}
}

// TestPlanShortSet: every mode runs each shape back to back, and the
// cells the summary line needs are there.
func TestPlanShortSet(t *testing.T) {
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cells := plan(cfg)
	if len(cells) != 5*4+4 {
		t.Fatalf("short set has %d cells; want 24", len(cells))
	}
	if cells[0].mode != modeDirect || cells[1].mode != modeDirectSDK || cells[2].mode != modeClientSide || cells[3].mode != modeGateway || cells[0].concurrency != cells[3].concurrency {
		t.Fatalf("first cells %v; want direct, direct-sdk, clientside, gateway of one shape", cells[:4])
	}
	want := []cell{
		{modeGateway, patternDistinct, 1 << 10, 64}, {modeDirect, patternDistinct, 1 << 10, 1},
		{modeStale, patternDistinct, 1 << 10, cfg.staleSummaryC},
	}
	for _, w := range want {
		found := false
		for _, c := range cells {
			found = found || c == w
		}
		if !found {
			t.Errorf("short set lacks %v", w)
		}
	}
}

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"--modes", "gateway,nope"},
		{"--modes", "baseline"},
		{"--concurrency", "0"},
		{"--sizes", "4B"},
		{"--set", "huge"},
		{"--stale-client", "curl"},
		{"extra"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded", args)
		}
	}
}

// TestRawConn: the stale cells' client reads answers whole and keeps its
// connection.
func TestRawConn(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPut || r.Header.Get("X-Fence-Token") != "1" || len(body) != 1<<10 {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, `{"type":"urn:fencegate:problem:stale-token"}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := &rawConn{addr: strings.TrimPrefix(srv.URL, "http://")}
	defer c.Close()
	w := &worker{body: newBodySource(1 << 10)}
	for range 3 {
		status, body, err := c.put(context.Background(), "/v1/objects/b/k", "1", w.nextBody(), 1<<10)
		if err != nil || status != http.StatusConflict || !bytes.Contains(body, []byte("stale-token")) {
			t.Fatalf("put = %d %q %v; want 409 stale-token", status, body, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("3 requests used %d connections; want 1", n)
	}
}

// TestSummaryLine pins the form of make bench's last line.
func TestSummaryLine(t *testing.T) {
	r := &report{
		Cells: []cellResult{
			{Mode: modeDirect, Pattern: patternDistinct, SizeBytes: 1 << 10, Concurrency: 1, RPS: 1000, P50: 0.5},
			{Mode: modeGateway, Pattern: patternDistinct, SizeBytes: 1 << 10, Concurrency: 1, RPS: 500, P50: 1.6},
			{Mode: modeDirect, Pattern: patternDistinct, SizeBytes: 1 << 10, Concurrency: 64, RPS: 4000},
			{Mode: modeClientSide, Pattern: patternDistinct, SizeBytes: 1 << 10, Concurrency: 64, RPS: 2000},
			{Mode: modeGateway, Pattern: patternDistinct, SizeBytes: 1 << 10, Concurrency: 64, RPS: 2400},
			{Mode: modeStale, Pattern: patternDistinct, SizeBytes: 1 << 10, Concurrency: 4, RPS: 23456.7, P99: 1.42},
		},
		Uploads: []uploadResult{{Gateway: modeGateway, Bytes: 1 << 30, RSSGrowthMiB: 3.4}},
	}
	r.finish(config{staleSummaryC: 4})
	want := "summary: c64_ratio_vs_direct=0.60 c64_ratio_vs_clientside=1.20 serial_p50_overhead_ms=1.10 stale_rps=23457 stale_p99_ms=1.42 upload_1g_rss_mib=3"
	if r.SummaryLine != want {
		t.Fatalf("summary line\n%s\nwant\n%s", r.SummaryLine, want)
	}
	form := regexp.MustCompile(`^summary: c64_ratio_vs_direct=\S+ c64_ratio_vs_clientside=\S+ serial_p50_overhead_ms=\S+ stale_rps=\S+ stale_p99_ms=\S+ upload_1g_rss_mib=\S+$`)
	if !form.MatchString((&report{}).withSummary().SummaryLine) {
		t.Fatal("the summary of an empty report does not have the summary's form")
	}
}

func (r *report) withSummary() *report {
	r.finish(config{staleSummaryC: 4})
	return r
}
