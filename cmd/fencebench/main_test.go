package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
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
	if len(cells) != 6*4+1+2+4+2+2+2 {
		t.Fatalf("short set has %d cells; want 37", len(cells))
	}
	if cells[0].mode != modeDirect || cells[1].mode != modeDirectSDK || cells[2].mode != modeClientSide || cells[3].mode != modeGateway || cells[0].concurrency != cells[3].concurrency {
		t.Fatalf("first cells %v; want direct, direct-sdk, clientside, gateway of one shape", cells[:4])
	}
	want := []cell{
		{modeGateway, patternDistinct, 1 << 10, 64}, {modeDirect, patternDistinct, 1 << 10, 1},
		{modeS3API, patternDistinct, 1 << 10, 64}, {modeS3APINetHTTP, patternDistinct, 1 << 10, 64}, {modeDirectSDK, patternDistinct, 1 << 10, 64},
		{modeStale, patternDistinct, 1 << 10, cfg.staleSummaryC},
		{modeGateway, patternRaise, 1 << 10, 64}, {modeClientSide, patternRaise, 1 << 10, 64}, {modeDirect, patternRaise, 1 << 10, 64},
		{modeStoreRaise, patternRaise, 0, raiseCeilingConcurrency}, {modeStoreRaiseUnbatched, patternRaise, 0, raiseCeilingConcurrency},
		{modeGCSDirect, patternDistinct, 1 << 10, 64}, {modeGCSGateway, patternDistinct, 1 << 10, 64},
		{modeTicket, patternRaise, 1 << 10, 64},
		{modeDirectSDK, patternRaise, 64 << 20, ticketLargeConcurrency}, {modeTicket, patternRaise, 64 << 20, ticketLargeConcurrency},
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
		{"--rounds", "0"},
		{"--ticket-large-bytes", "2GiB"},
		{"--ticket-large-bytes", "8B"},
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
			{Mode: modeGateway, Pattern: patternDistinct, SizeBytes: 1 << 10, Concurrency: 64, RPS: 2400, OK: 1000,
				CPUPer1000: perProcess{Gateway: ptr(0.2), Etcd: ptr(0.05), S3: ptr(0.3)}},
			{Mode: modeDirectSDK, Pattern: patternDistinct, SizeBytes: 1 << 10, Concurrency: 64, RPS: 3000},
			{Mode: modeS3API, Pattern: patternDistinct, SizeBytes: 1 << 10, Concurrency: 64, RPS: 2550, OK: 1000,
				CPUPer1000: perProcess{Gateway: ptr(0.3), Etcd: ptr(0.05), S3: ptr(0.3)}},
			{Mode: modeS3APINetHTTP, Pattern: patternDistinct, SizeBytes: 1 << 10, Concurrency: 64, RPS: 2400, OK: 1000, Conflicts: 20,
				CPUPer1000: perProcess{Gateway: ptr(0.25), Etcd: ptr(0.05), S3: ptr(0.3)}},
			{Mode: modeStale, Pattern: patternDistinct, SizeBytes: 1 << 10, Concurrency: 4, RPS: 23456.7, P99: 1.42},
			{Mode: modeDirect, Pattern: patternRaise, SizeBytes: 1 << 10, Concurrency: 64, RPS: 1500},
			{Mode: modeDirectSDK, Pattern: patternRaise, SizeBytes: 1 << 10, Concurrency: 64, RPS: 1600},
			{Mode: modeClientSide, Pattern: patternRaise, SizeBytes: 1 << 10, Concurrency: 64, RPS: 1000},
			{Mode: modeGateway, Pattern: patternRaise, SizeBytes: 1 << 10, Concurrency: 64, RPS: 1200, OK: 900, Conflicts: 100,
				CPUPer1000: perProcess{Gateway: ptr(0.225), Etcd: ptr(0.09), S3: ptr(0.36)}},
			{Mode: modeStoreRaise, Pattern: patternRaise, Concurrency: 256, RPS: 30000},
			{Mode: modeStoreRaiseUnbatched, Pattern: patternRaise, Concurrency: 256, RPS: 15000},
			{Mode: modeGCSDirect, Pattern: patternDistinct, SizeBytes: 1 << 10, Concurrency: 64, RPS: 200},
			{Mode: modeGCSGateway, Pattern: patternDistinct, SizeBytes: 1 << 10, Concurrency: 64, RPS: 190},
			{Mode: modeTicket, Pattern: patternRaise, SizeBytes: 1 << 10, Concurrency: 64, RPS: 800, OK: 500, GatewayBytesPerWrite: ptr(231.4)},
			{Mode: modeDirectSDK, Pattern: patternRaise, SizeBytes: 64 << 20, Concurrency: 2, RPS: 6},
			{Mode: modeTicket, Pattern: patternRaise, SizeBytes: 64 << 20, Concurrency: 2, RPS: 5.82, OK: 100,
				CPUPer1000: perProcess{Gateway: ptr(1.5)}, GatewayBytesPerWrite: ptr(229)},
		},
		Uploads: []uploadResult{{Gateway: modeGateway, Bytes: 1 << 30, RSSGrowthMiB: 3.4}, {Gateway: "large", Bytes: 6 << 30, RSSGrowthMiB: 20.2}},
	}
	r.finish(config{staleSummaryC: 4})
	want := "summary: c64_ratio_vs_direct=0.60 c64_ratio_vs_direct_sdk=0.80 c64_ratio_vs_clientside=1.20 serial_p50_overhead_ms=1.10 stale_rps=23457 stale_p99_ms=1.42 upload_1g_rss_mib=3 upload_6g_rss_mib=20" +
		" raise_c64_ratio_vs_clientside=1.20 raise_c64_ratio_vs_direct=0.80 raise_c64_ratio_vs_direct_sdk=0.75 raise_ceiling_ratio_batched_vs_unbatched=2.00" +
		" gw_cpu_ms_per_write=0.200 etcd_cpu_ms_per_write=0.050 s3_cpu_ms_per_write=0.300" +
		" raise_gw_cpu_ms_per_write=0.250 raise_etcd_cpu_ms_per_write=0.100 raise_s3_cpu_ms_per_write=0.400 gcs_c64_ratio_vs_direct=0.95" +
		" s3api_c64_ratio_vs_direct_sdk=0.85 s3api_gw_cpu_ms_per_write=0.255 s3api_cpu_ratio_vs_rest=1.27" +
		" ticket_c64_ratio_vs_direct_sdk=0.50 ticket_64mib_ratio_vs_direct_sdk=0.97 ticket_64mib_gw_cpu_ms_per_write=1.500 ticket_gw_bytes_per_write=231"
	if r.SummaryLine != want {
		t.Fatalf("summary line\n%s\nwant\n%s", r.SummaryLine, want)
	}
	form := regexp.MustCompile(`^summary: c64_ratio_vs_direct=\S+ c64_ratio_vs_direct_sdk=\S+ c64_ratio_vs_clientside=\S+ serial_p50_overhead_ms=\S+ stale_rps=\S+ stale_p99_ms=\S+ upload_1g_rss_mib=\S+ upload_6g_rss_mib=\S+ ` +
		`raise_c64_ratio_vs_clientside=\S+ raise_c64_ratio_vs_direct=\S+ raise_c64_ratio_vs_direct_sdk=\S+ raise_ceiling_ratio_batched_vs_unbatched=\S+ ` +
		`gw_cpu_ms_per_write=\S+ etcd_cpu_ms_per_write=\S+ s3_cpu_ms_per_write=\S+ ` +
		`raise_gw_cpu_ms_per_write=\S+ raise_etcd_cpu_ms_per_write=\S+ raise_s3_cpu_ms_per_write=\S+ gcs_c64_ratio_vs_direct=\S+ s3api_c64_ratio_vs_direct_sdk=\S+ ` +
		`s3api_gw_cpu_ms_per_write=\S+ s3api_cpu_ratio_vs_rest=\S+ ` +
		`ticket_c64_ratio_vs_direct_sdk=\S+ ticket_64mib_ratio_vs_direct_sdk=\S+ ticket_64mib_gw_cpu_ms_per_write=\S+ ticket_gw_bytes_per_write=\S+$`)
	if !form.MatchString((&report{}).withSummary().SummaryLine) {
		t.Fatal("the summary of an empty report does not have the summary's form")
	}
}

func (r *report) withSummary() *report {
	r.finish(config{staleSummaryC: 4})
	return r
}

// TestShapes: the run measures each shape's modes together, and a shape
// is one pattern, size and concurrency, stale or not.
func TestShapes(t *testing.T) {
	cfg, err := parseFlags([]string{"--baseline-fencegate", "/bin/true"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cells := plan(cfg)
	var shapes [][]cell
	for i := 0; i < len(cells); {
		n := shapeLen(cells[i:])
		shapes = append(shapes, cells[i:i+n])
		i += n
	}
	if len(shapes) != 6+4+1+1+1 {
		t.Fatalf("short set has %d shapes; want 13", len(shapes))
	}
	for _, s := range shapes {
		want := 5 // direct, direct-sdk, clientside, gateway, baseline
		switch {
		case s[0].stale():
			want = 2 // stale, stale-baseline
		case storeMode(s[0].mode):
			want = 2 // store-raise, store-raise-unbatched
		case gcsMode(s[0].mode):
			want = 2 // gcs-direct, gcs-gateway
		case s3APIShape(s[0].pattern, s[0].size, s[0].concurrency):
			want = 7 // and s3api, s3api-nethttp
		case ticketShortShape(s[0].pattern, s[0].size, s[0].concurrency):
			want = 6 // and ticket
		case s[0].size == ticketLargeBytes:
			want = 2 // direct-sdk, ticket
		}
		if len(s) != want {
			t.Errorf("shape %v has %d cells; want %d", s, len(s), want)
		}
	}
}

// TestRoundOrder: the rounds run a shape's cells in turn forward and
// backward, so that over an even number of rounds every cell's mean
// place is the middle.
func TestRoundOrder(t *testing.T) {
	tests := []struct {
		n, round int
		want     []int
	}{
		{1, 0, []int{0}}, {1, 1, []int{0}},
		{3, 0, []int{0, 1, 2}}, {3, 1, []int{2, 1, 0}}, {3, 2, []int{0, 1, 2}}, {3, 3, []int{2, 1, 0}},
	}
	for _, tt := range tests {
		if got := roundOrder(tt.n, tt.round); !slices.Equal(got, tt.want) {
			t.Errorf("roundOrder(%d, %d) = %v; want %v", tt.n, tt.round, got, tt.want)
		}
	}
}

// TestRoundOrderBuilds: over four rounds the gateway and the baseline
// build come right after the same modes as often (a cell measured right
// after client-side fencing pays for what that left, such as etcd's and
// the load tool's garbage), each counting the other build as "the other
// build".
func TestRoundOrderBuilds(t *testing.T) {
	for _, modes := range [][]string{
		{modeDirect, modeClientSide, modeGateway, modeBaseline},
		{modeDirect, modeDirectSDK, modeClientSide, modeGateway, modeBaseline},
		{modeGateway, modeBaseline},
	} {
		cells := make([]cell, len(modes))
		for i, m := range modes {
			cells[i] = cell{mode: m, pattern: patternDistinct, size: 1 << 10, concurrency: 64}
		}
		after := map[string]map[string]int{modeGateway: {}, modeBaseline: {}}
		var orders [][]string
		for round := range 4 {
			var order []string
			prev := "start"
			for _, i := range shapeOrder(cells, round) {
				m := cells[i].mode
				order = append(order, m)
				if after[m] != nil {
					p := prev
					if after[p] != nil {
						p = "other build"
					}
					after[m][p]++
				}
				prev = m
			}
			orders = append(orders, order)
		}
		if !maps.Equal(after[modeGateway], after[modeBaseline]) {
			t.Errorf("modes %v: orders %v: the gateway comes after %v, the baseline after %v; want the same", modes, orders, after[modeGateway], after[modeBaseline])
		}
	}
}

// TestMeasurementAdd: a cell's rounds add up to the figures of one window
// as long as theirs together, whatever the counters did between them.
func TestMeasurementAdd(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	snap := func(gw, etcd, s3, self, machine time.Duration, requests int64) snapshot {
		return snapshot{gateway: gw, etcd: etcd, s3: s3, self: self, machine: machine, etcdRequests: requests}
	}
	c := cell{modeStale, patternDistinct, 1 << 10, 4}
	first := measurement{
		w:     window{time.Second, tally{latencies: []time.Duration{ms(1), ms(3)}, ok: 2, conflicts: 1, errors: 1, firstErr: errors.New("first")}},
		start: snap(ms(100), ms(10), ms(1000), ms(50), ms(5000), 7),
		end:   snap(ms(400), ms(20), ms(1300), ms(150), ms(6500), 10),
	}
	// The counters moved between the rounds (other cells ran): that
	// movement must not count.
	second := measurement{
		w:         window{time.Second, tally{latencies: []time.Duration{ms(2)}, ok: 1, firstErr: errors.New("second")}},
		start:     snap(ms(900), ms(90), ms(9000), ms(500), ms(20000), 50),
		end:       snap(ms(1000), ms(110), ms(9100), ms(600), ms(20600), 51),
		staleEtcd: 0, staleS3: 3,
	}
	m := first
	m.add(second)
	got := m.result(c)
	if got.OK != 3 || got.Conflicts != 1 || got.Errors != 1 || got.Seconds != 2 || got.RPS != 1.5 || got.FirstError != "first" {
		t.Errorf("counts: ok %d, conflicts %d, errors %d, %vs, %v/s, first error %q; want 3, 1, 1, 2s, 1.5/s, \"first\"",
			got.OK, got.Conflicts, got.Errors, got.Seconds, got.RPS, got.FirstError)
	}
	if got.P50 != 2 {
		t.Errorf("p50 %v ms; want 2 (the rounds' latencies sorted together)", got.P50)
	}
	// 4 requests (ok and conflicts); the gateway used 300 + 100 ms.
	checks := []struct {
		name      string
		got       *float64
		want      float64
		wantCores float64
		cores     *float64
	}{
		{"gateway", got.CPUPer1000.Gateway, 0.4 / 4 * 1000, 0.2, got.Cores.Gateway},
		{"etcd", got.CPUPer1000.Etcd, 0.03 / 4 * 1000, 0.015, got.Cores.Etcd},
		{"s3", got.CPUPer1000.S3, 0.4 / 4 * 1000, 0.2, got.Cores.S3},
		{"bench", got.CPUPer1000.Bench, 0.2 / 4 * 1000, 0.1, got.Cores.Bench},
	}
	for _, ck := range checks {
		if ck.got == nil || math.Abs(*ck.got-ck.want) > 1e-9 || ck.cores == nil || math.Abs(*ck.cores-ck.wantCores) > 1e-9 {
			t.Errorf("%s: %v s per 1000, %v cores; want %v and %v", ck.name, ck.got, ck.cores, ck.want, ck.wantCores)
		}
	}
	// The machine was busy 2.1 s over the 2 s, the processes 1.03 s.
	if got.OtherCores == nil || math.Abs(*got.OtherCores-(2.1-1.03)/2) > 1e-9 {
		t.Errorf("other cores %v; want %v", got.OtherCores, (2.1-1.03)/2)
	}
	if got.EtcdRequestsPerOp == nil || *got.EtcdRequestsPerOp != 1 {
		t.Errorf("etcd requests per op %v; want (3 + 1) / 4 = 1", got.EtcdRequestsPerOp)
	}
	if got.StaleEtcdRequests == nil || *got.StaleEtcdRequests != 0 || got.StaleS3Requests == nil || *got.StaleS3Requests != 3 {
		t.Errorf("stale requests: etcd %v, S3 %v; want 0 and 3", got.StaleEtcdRequests, got.StaleS3Requests)
	}

	// A counter unknown in any round is unknown over the cell.
	m = first
	second.end.gateway = -1
	m.add(second)
	if got := m.result(c); got.CPUPer1000.Gateway != nil || got.CPUPer1000.Etcd == nil {
		t.Errorf("gateway CPU %v, etcd CPU %v; want unknown and known", got.CPUPer1000.Gateway, got.CPUPer1000.Etcd)
	}
}

func ptr(v float64) *float64 { return &v }
