package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// report is a run's results.
type report struct {
	Date    string         `json:"date"`
	Machine machine        `json:"machine"`
	Config  reportConfig   `json:"config"`
	Cells   []cellResult   `json:"cells"`
	Uploads []uploadResult `json:"uploads,omitempty"`
	Events  *eventsResult  `json:"events,omitempty"` // the events cell (events.go)
	Summary summary        `json:"summary"`
	// SummaryLine is the summary as make bench prints it last.
	SummaryLine string `json:"summary_line"`
}

type machine struct {
	CPUs     int    `json:"nproc"`
	CPUModel string `json:"cpu_model"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
}

type reportConfig struct {
	Set             string   `json:"set"`
	Modes           []string `json:"modes"`
	Duration        string   `json:"duration"`
	Rounds          int      `json:"rounds"`
	Warmup          string   `json:"warmup"`
	MaxRequests     int64    `json:"max_requests"`
	Fencegate       string   `json:"fencegate"`
	FencegateBuild  string   `json:"fencegate_build"`
	Baseline        string   `json:"baseline_fencegate,omitempty"`
	BaselineBuild   string   `json:"baseline_build,omitempty"`
	GatewayLogLevel string   `json:"gateway_log_level"`
	StaleClient     string   `json:"stale_client"`
	EtcdFsync       bool     `json:"etcd_fsync"`
	S3KeepAlive     bool     `json:"s3_keep_alive"`
	S3Data          string   `json:"s3_data,omitempty"`
	EtcdStarted     bool     `json:"etcd_started"`
	S3Started       bool     `json:"s3_started"`
}

// millis is a duration in milliseconds that is JSON null when unknown.
type millis float64

func (m millis) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(m)) || math.IsInf(float64(m), 0) {
		return []byte("null"), nil
	}
	return []byte(strconv.FormatFloat(float64(m), 'f', 3, 64)), nil
}

// perProcess holds one figure for each process that serves a request.
// Null: not measured (no such process in the cell, or no /proc).
type perProcess struct {
	Gateway *float64 `json:"gateway"`
	Etcd    *float64 `json:"etcd"`
	S3      *float64 `json:"s3"`
	// Bench is this program: the load's clients, and in clientside
	// cells the fencing work too.
	Bench *float64 `json:"bench"`
}

type cellResult struct {
	Mode        string  `json:"mode"`
	Pattern     string  `json:"pattern"`
	SizeBytes   int64   `json:"size_bytes"`
	Concurrency int     `json:"concurrency"`
	Seconds     float64 `json:"seconds"`
	OK          int64   `json:"ok"`
	Conflicts   int64   `json:"conflicts"`
	Errors      int64   `json:"errors"`
	// Resets counts the errors that are S3 resetting the connection while
	// a body was being sent (see tally.resets): lost races on hot
	// objects with large bodies, which do not fail the run.
	Resets     int64  `json:"resets,omitempty"`
	FirstError string `json:"first_error,omitempty"`
	// RPS counts OK answers per second: accepted writes, or refusals in
	// the stale modes.
	RPS  float64 `json:"rps"`
	P50  millis  `json:"p50_ms"`
	P99  millis  `json:"p99_ms"`
	P999 millis  `json:"p999_ms"`
	// CPUPer1000 is CPU seconds per 1,000 requests (OK and conflicts).
	CPUPer1000 perProcess `json:"cpu_seconds_per_1000"`
	// Cores is each process's CPU seconds per second of the window.
	Cores perProcess `json:"cores"`
	// OtherCores is the machine's busy CPU seconds per second of the
	// window that none of the measured processes used: the kernel's
	// network work done outside them, and any other process. A large value
	// means the cell shared the machine with something else.
	OtherCores *float64 `json:"other_cores"`
	// EtcdRequestsPerOp is etcd's gRPC requests per request, from every
	// client.
	EtcdRequestsPerOp *float64 `json:"etcd_requests_per_op,omitempty"`
	// StaleEtcdRequests and StaleS3Requests are the requests that etcd
	// (from anyone) and S3 (from the stale gateway) received during the
	// whole stale cell, warm-ups included. They must be zero.
	StaleEtcdRequests *int64 `json:"stale_etcd_requests,omitempty"`
	StaleS3Requests   *int64 `json:"stale_s3_requests,omitempty"`
	// GatewayBytesPerWrite is, in a ticket cell, the bytes the load wrote
	// to its connections to the gateway (request lines, headers and the
	// JSON bodies of the ticket requests) per accepted write: all the
	// gateway read, counted as it was sent (ticket.go).
	GatewayBytesPerWrite *float64 `json:"gw_bytes_per_write,omitempty"`
	// RatioVsDirect, RatioVsDirectSDK and RatioVsClientSide are a
	// gateway cell's RPS over the direct, direct-sdk and clientside cells
	// of the same shape.
	RatioVsDirect     *float64 `json:"ratio_vs_direct,omitempty"`
	RatioVsDirectSDK  *float64 `json:"ratio_vs_direct_sdk,omitempty"`
	RatioVsClientSide *float64 `json:"ratio_vs_clientside,omitempty"`
	Notes             []string `json:"notes,omitempty"`
}

// disturbedCores is how much CPU other processes may take during a window
// before the cell counts as disturbed.
const disturbedCores = 0.15

// otherCores returns OtherCores, or 0 when unknown.
func (r cellResult) otherCores() float64 {
	if r.OtherCores == nil {
		return 0
	}
	return *r.OtherCores
}

func newCellResult(c cell, w window, start, end snapshot) cellResult {
	r := cellResult{
		Mode:        c.mode,
		Pattern:     c.pattern,
		SizeBytes:   c.size,
		Concurrency: c.concurrency,
		Seconds:     w.elapsed.Seconds(),
		OK:          w.ok,
		Conflicts:   w.conflicts,
		Errors:      w.errors,
		Resets:      w.resets,
		RPS:         float64(w.ok) / w.elapsed.Seconds(),
		P50:         millis(percentile(w.latencies, 0.50)),
		P99:         millis(percentile(w.latencies, 0.99)),
		P999:        millis(percentile(w.latencies, 0.999)),
	}
	if w.firstErr != nil {
		r.FirstError = w.firstErr.Error()
	}
	requests := float64(w.ok + w.conflicts)
	cpu := func(a, b time.Duration) (per1000, cores *float64) {
		if a < 0 || b < 0 {
			return nil, nil
		}
		used := (b - a).Seconds()
		c := used / w.elapsed.Seconds()
		cores = &c
		if requests > 0 {
			p := used / requests * 1000
			per1000 = &p
		}
		return per1000, cores
	}
	r.CPUPer1000.Gateway, r.Cores.Gateway = cpu(start.gateway, end.gateway)
	r.CPUPer1000.Etcd, r.Cores.Etcd = cpu(start.etcd, end.etcd)
	r.CPUPer1000.S3, r.Cores.S3 = cpu(start.s3, end.s3)
	r.CPUPer1000.Bench, r.Cores.Bench = cpu(start.self, end.self)
	if start.machine >= 0 && end.machine >= 0 {
		other := (end.machine - start.machine).Seconds()
		for _, c := range []*float64{r.Cores.Gateway, r.Cores.Etcd, r.Cores.S3, r.Cores.Bench} {
			if c != nil {
				other -= *c * w.elapsed.Seconds()
			}
		}
		o := max(0, other/w.elapsed.Seconds())
		r.OtherCores = &o
	}
	if err := firstErr(start.errs, end.errs); err == nil && requests > 0 {
		per := float64(end.etcdRequests-start.etcdRequests) / requests
		r.EtcdRequestsPerOp = &per
	}
	if c.mode == modeTicket && w.ok > 0 {
		per := float64(end.ticketBytes-start.ticketBytes) / float64(w.ok)
		r.GatewayBytesPerWrite = &per
	}
	if w.resets > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d of the errors are S3 resetting the connection while the body was being sent "+
			"(versitygw refuses a conditional write before reading the body and closes the connection; the writer never sees the 412)", w.resets))
	}
	if len(w.latencies) < 1000 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d samples: p99.9 needs 1000", len(w.latencies)))
	}
	return r
}

// summary is the figures of the targets.
//
// Each ratio to direct writes comes twice: against modeDirect (the
// gateway's own lean signed PUT, which no application runs: the harder
// floor) and, as _sdk, against modeDirectSDK (aws-sdk-go-v2 writing
// straight to S3: what an application that does not use fencegate runs,
// and what modeDirect was until the signed path replaced the SDK's
// PutObject in backends/s3).
type summary struct {
	C64RatioVsDirect     *float64 `json:"c64_ratio_vs_direct"`
	C64RatioVsDirectSDK  *float64 `json:"c64_ratio_vs_direct_sdk"`
	C64RatioVsClientSide *float64 `json:"c64_ratio_vs_clientside"`
	SerialP50OverheadMs  *float64 `json:"serial_p50_overhead_ms"`
	StaleRPS             *float64 `json:"stale_rps"`
	StaleP99Ms           *float64 `json:"stale_p99_ms"`
	Upload1GRSSMiB       *float64 `json:"upload_1g_rss_mib"`
	// Upload6GRSSMiB is the large upload's, in parts (largeupload.go).
	Upload6GRSSMiB *float64 `json:"upload_6g_rss_mib"`
	// The raise shape (raise.go): the gateway at 64 writers over
	// client-side fencing and over direct writes, and fence raises alone
	// at raiseCeilingConcurrency, with group commit over without.
	RaiseC64RatioVsClientSide           *float64 `json:"raise_c64_ratio_vs_clientside"`
	RaiseC64RatioVsDirect               *float64 `json:"raise_c64_ratio_vs_direct"`
	RaiseC64RatioVsDirectSDK            *float64 `json:"raise_c64_ratio_vs_direct_sdk"`
	RaiseCeilingRatioBatchedVsUnbatched *float64 `json:"raise_ceiling_ratio_batched_vs_unbatched"`
	// CPU milliseconds per accepted write of each process on the
	// gateway's path at 64 writers, 1 KiB, distinct objects: the
	// same-token shape, then the raise shape. Each is that process's CPU
	// over the cell's windows divided by its accepted writes, so that
	// they say what each tier would need per write on a machine of its
	// own.
	GatewayCPUMsPerWrite      *float64 `json:"gw_cpu_ms_per_write"`
	EtcdCPUMsPerWrite         *float64 `json:"etcd_cpu_ms_per_write"`
	S3CPUMsPerWrite           *float64 `json:"s3_cpu_ms_per_write"`
	RaiseGatewayCPUMsPerWrite *float64 `json:"raise_gw_cpu_ms_per_write"`
	RaiseEtcdCPUMsPerWrite    *float64 `json:"raise_etcd_cpu_ms_per_write"`
	RaiseS3CPUMsPerWrite      *float64 `json:"raise_s3_cpu_ms_per_write"`
	// GCSC64RatioVsDirect is the gateway over direct conditional writes
	// to fake-gcs-server, at 64 writers (gcs.go).
	GCSC64RatioVsDirect *float64 `json:"gcs_c64_ratio_vs_direct"`
	// S3APIC64RatioVsDirectSDK is PutObject through the S3 API over the
	// same SDK writing straight to S3 (s3api.go).
	S3APIC64RatioVsDirectSDK *float64 `json:"s3api_c64_ratio_vs_direct_sdk"`
	// S3APIGatewayCPUMsPerWrite is the S3 API gateway's CPU milliseconds
	// per accepted PutObject, the SDK's requests sent with net/http
	// (modeS3APINetHTTP, s3api.go), measured as GatewayCPUMsPerWrite is,
	// and S3APICPURatioVsREST is it over GatewayCPUMsPerWrite: the REST
	// API's at the same shape (64 writers, 1 KiB, distinct objects),
	// whose cell runs in the same rounds.
	S3APIGatewayCPUMsPerWrite *float64 `json:"s3api_gw_cpu_ms_per_write"`
	S3APICPURatioVsREST       *float64 `json:"s3api_cpu_ratio_vs_rest"`
	// The ticket cells (ticket.go), each over direct-sdk in the same
	// rounds: TicketC64RatioVsDirectSDK at 64 writers, 1 KiB, a new token
	// each write; Ticket64MiBRatioVsDirectSDK with 64 MiB objects
	// (at least ticketLargeRatioFloor), and the gateway's CPU
	// milliseconds per write there; TicketGatewayBytesPerWrite the
	// largest of the ticket cells' GatewayBytesPerWrite (below
	// ticketGatewayBytesCeiling).
	TicketC64RatioVsDirectSDK       *float64 `json:"ticket_c64_ratio_vs_direct_sdk"`
	Ticket64MiBRatioVsDirectSDK     *float64 `json:"ticket_64mib_ratio_vs_direct_sdk"`
	Ticket64MiBGatewayCPUMsPerWrite *float64 `json:"ticket_64mib_gw_cpu_ms_per_write"`
	TicketGatewayBytesPerWrite      *float64 `json:"ticket_gw_bytes_per_write"`
}

// finish fills in the ratios and the summary.
func (r *report) finish(cfg config) {
	find := func(mode, pattern string, size int64, conc int) *cellResult {
		for i := range r.Cells {
			c := &r.Cells[i]
			if c.Mode == mode && c.Pattern == pattern && c.SizeBytes == size && c.Concurrency == conc {
				return c
			}
		}
		return nil
	}
	ratio := func(a, b *cellResult) *float64 {
		if a == nil || b == nil || b.RPS == 0 {
			return nil
		}
		v := a.RPS / b.RPS
		return &v
	}
	for i := range r.Cells {
		c := &r.Cells[i]
		if c.Mode != modeGateway && c.Mode != modeBaseline && c.Mode != modeS3API && c.Mode != modeTicket {
			continue
		}
		c.RatioVsDirect = ratio(c, find(modeDirect, c.Pattern, c.SizeBytes, c.Concurrency))
		c.RatioVsDirectSDK = ratio(c, find(modeDirectSDK, c.Pattern, c.SizeBytes, c.Concurrency))
		c.RatioVsClientSide = ratio(c, find(modeClientSide, c.Pattern, c.SizeBytes, c.Concurrency))
	}
	s := &r.Summary
	if g := find(modeGateway, patternDistinct, 1<<10, 64); g != nil {
		s.C64RatioVsDirect, s.C64RatioVsDirectSDK, s.C64RatioVsClientSide = g.RatioVsDirect, g.RatioVsDirectSDK, g.RatioVsClientSide
	}
	g, d := find(modeGateway, patternDistinct, 1<<10, 1), find(modeDirect, patternDistinct, 1<<10, 1)
	if g != nil && d != nil && !math.IsNaN(float64(g.P50)) && !math.IsNaN(float64(d.P50)) {
		v := float64(g.P50 - d.P50)
		s.SerialP50OverheadMs = &v
	}
	if st := find(modeStale, patternDistinct, 1<<10, cfg.staleSummaryC); st != nil {
		rps, p99 := st.RPS, float64(st.P99)
		s.StaleRPS = &rps
		if !math.IsNaN(p99) {
			s.StaleP99Ms = &p99
		}
	}
	if g := find(modeGateway, patternDistinct, 1<<10, 64); g != nil {
		s.GatewayCPUMsPerWrite, s.EtcdCPUMsPerWrite, s.S3CPUMsPerWrite = g.cpuMsPerWrite()
	}
	if g := find(modeGateway, patternRaise, 1<<10, 64); g != nil {
		s.RaiseC64RatioVsDirect, s.RaiseC64RatioVsDirectSDK, s.RaiseC64RatioVsClientSide = g.RatioVsDirect, g.RatioVsDirectSDK, g.RatioVsClientSide
		s.RaiseGatewayCPUMsPerWrite, s.RaiseEtcdCPUMsPerWrite, s.RaiseS3CPUMsPerWrite = g.cpuMsPerWrite()
	}
	s.RaiseCeilingRatioBatchedVsUnbatched = ratio(
		find(modeStoreRaise, patternRaise, 0, raiseCeilingConcurrency),
		find(modeStoreRaiseUnbatched, patternRaise, 0, raiseCeilingConcurrency))
	if g := find(modeGCSGateway, patternDistinct, 1<<10, gcsCellConcurrency); g != nil {
		g.RatioVsDirect = ratio(g, find(modeGCSDirect, patternDistinct, 1<<10, gcsCellConcurrency))
		s.GCSC64RatioVsDirect = g.RatioVsDirect
	}
	s.S3APIC64RatioVsDirectSDK = ratio(find(modeS3API, s3APIPattern, s3APISize, s3APIConcurrency), find(modeDirectSDK, s3APIPattern, s3APISize, s3APIConcurrency))
	if door := find(modeS3APINetHTTP, s3APIPattern, s3APISize, s3APIConcurrency); door != nil {
		s.S3APIGatewayCPUMsPerWrite, s.S3APICPURatioVsREST = gatewayCPURatio(door, find(modeGateway, s3APIPattern, s3APISize, s3APIConcurrency))
	}
	if tk := find(modeTicket, ticketShortPattern, ticketShortSize, ticketShortConcurrency); tk != nil {
		s.TicketC64RatioVsDirectSDK = tk.RatioVsDirectSDK
	}
	if tk := find(modeTicket, patternRaise, ticketLargeBytes, ticketLargeConcurrency); tk != nil {
		s.Ticket64MiBRatioVsDirectSDK = tk.RatioVsDirectSDK
		s.Ticket64MiBGatewayCPUMsPerWrite, _, _ = tk.cpuMsPerWrite()
	}
	for _, c := range r.Cells {
		if v := c.GatewayBytesPerWrite; c.Mode == modeTicket && v != nil && (s.TicketGatewayBytesPerWrite == nil || *v > *s.TicketGatewayBytesPerWrite) {
			s.TicketGatewayBytesPerWrite = v
		}
	}
	for _, u := range r.Uploads {
		if u.Gateway == modeGateway && u.Bytes == 1<<30 {
			v := u.RSSGrowthMiB
			s.Upload1GRSSMiB = &v
		}
		if u.Gateway == "large" && u.Bytes == largeUploadBytes {
			v := u.RSSGrowthMiB
			s.Upload6GRSSMiB = &v
		}
	}
	r.SummaryLine = "summary: " + strings.Join([]string{
		"c64_ratio_vs_direct=" + format(s.C64RatioVsDirect, 2),
		"c64_ratio_vs_direct_sdk=" + format(s.C64RatioVsDirectSDK, 2),
		"c64_ratio_vs_clientside=" + format(s.C64RatioVsClientSide, 2),
		"serial_p50_overhead_ms=" + format(s.SerialP50OverheadMs, 2),
		"stale_rps=" + format(s.StaleRPS, 0),
		"stale_p99_ms=" + format(s.StaleP99Ms, 2),
		"upload_1g_rss_mib=" + format(s.Upload1GRSSMiB, 0),
		"upload_6g_rss_mib=" + format(s.Upload6GRSSMiB, 0),
		"raise_c64_ratio_vs_clientside=" + format(s.RaiseC64RatioVsClientSide, 2),
		"raise_c64_ratio_vs_direct=" + format(s.RaiseC64RatioVsDirect, 2),
		"raise_c64_ratio_vs_direct_sdk=" + format(s.RaiseC64RatioVsDirectSDK, 2),
		"raise_ceiling_ratio_batched_vs_unbatched=" + format(s.RaiseCeilingRatioBatchedVsUnbatched, 2),
		"gw_cpu_ms_per_write=" + format(s.GatewayCPUMsPerWrite, 3),
		"etcd_cpu_ms_per_write=" + format(s.EtcdCPUMsPerWrite, 3),
		"s3_cpu_ms_per_write=" + format(s.S3CPUMsPerWrite, 3),
		"raise_gw_cpu_ms_per_write=" + format(s.RaiseGatewayCPUMsPerWrite, 3),
		"raise_etcd_cpu_ms_per_write=" + format(s.RaiseEtcdCPUMsPerWrite, 3),
		"raise_s3_cpu_ms_per_write=" + format(s.RaiseS3CPUMsPerWrite, 3),
		"gcs_c64_ratio_vs_direct=" + format(s.GCSC64RatioVsDirect, 2),
		"s3api_c64_ratio_vs_direct_sdk=" + format(s.S3APIC64RatioVsDirectSDK, 2),
		"s3api_gw_cpu_ms_per_write=" + format(s.S3APIGatewayCPUMsPerWrite, 3),
		"s3api_cpu_ratio_vs_rest=" + format(s.S3APICPURatioVsREST, 2),
		"ticket_c64_ratio_vs_direct_sdk=" + format(s.TicketC64RatioVsDirectSDK, 2),
		"ticket_64mib_ratio_vs_direct_sdk=" + format(s.Ticket64MiBRatioVsDirectSDK, 2),
		"ticket_64mib_gw_cpu_ms_per_write=" + format(s.Ticket64MiBGatewayCPUMsPerWrite, 3),
		"ticket_gw_bytes_per_write=" + format(s.TicketGatewayBytesPerWrite, 0),
	}, " ")
	if r.Events != nil {
		r.SummaryLine += " " + r.Events.summaryFields()
	}
}

// gatewayCPURatio returns the gateway CPU milliseconds per accepted
// write of door (nil when not measured) and its ratio to rest's (nil
// unless both are measured, rest's above zero; rest may be nil).
func gatewayCPURatio(door, rest *cellResult) (cpu, ratio *float64) {
	cpu, _, _ = door.cpuMsPerWrite()
	if rest == nil || cpu == nil {
		return cpu, nil
	}
	if restCPU, _, _ := rest.cpuMsPerWrite(); restCPU != nil && *restCPU > 0 {
		v := *cpu / *restCPU
		ratio = &v
	}
	return cpu, ratio
}

// cpuMsPerWrite returns the CPU milliseconds per accepted write of the
// gateway, etcd and S3 processes in cell r: each one's CPU seconds per
// 1,000 requests (accepted and conflicts) scaled to its accepted writes.
// A figure is nil when the process was not measured or nothing was
// accepted.
func (r cellResult) cpuMsPerWrite() (gateway, etcd, s3 *float64) {
	perWrite := func(per1000 *float64) *float64 {
		if per1000 == nil || r.OK == 0 {
			return nil
		}
		// s per 1,000 requests is ms per request.
		v := *per1000 * float64(r.OK+r.Conflicts) / float64(r.OK)
		return &v
	}
	return perWrite(r.CPUPer1000.Gateway), perWrite(r.CPUPer1000.Etcd), perWrite(r.CPUPer1000.S3)
}

func format(v *float64, decimals int) string {
	if v == nil {
		return "n/a"
	}
	return strconv.FormatFloat(*v, 'f', decimals, 64)
}

// failures returns an error if any cell had errors, a stale cell
// reached etcd or S3, or a ticket figure of the summary is on the wrong
// side of its bound (ticket.go).
func (r *report) failures() error {
	var errs []error
	for _, c := range r.Cells {
		name := cell{c.Mode, c.Pattern, c.SizeBytes, c.Concurrency}.String()
		if n := c.Errors - c.hotResets(); n > 0 {
			errs = append(errs, fmt.Errorf("%s: %d errors, the first: %s", name, n, c.FirstError))
		}
		if c.StaleEtcdRequests != nil && *c.StaleEtcdRequests != 0 || c.StaleS3Requests != nil && *c.StaleS3Requests != 0 {
			errs = append(errs, fmt.Errorf("%s: stale refusals made %s etcd and %s S3 requests; want 0", name,
				formatInt(c.StaleEtcdRequests), formatInt(c.StaleS3Requests)))
		}
	}
	if v := r.Summary.Ticket64MiBRatioVsDirectSDK; v != nil && *v < ticketLargeRatioFloor {
		errs = append(errs, fmt.Errorf("ticket_64mib_ratio_vs_direct_sdk=%s; want at least %.2f", format(v, 2), ticketLargeRatioFloor))
	}
	if v := r.Summary.TicketGatewayBytesPerWrite; v != nil && *v >= ticketGatewayBytesCeiling {
		errs = append(errs, fmt.Errorf("ticket_gw_bytes_per_write=%s; want below %d: the bytes went through the gateway", format(v, 0), ticketGatewayBytesCeiling))
	}
	return errors.Join(errs...)
}

// hotResets returns the resets of a hot cell: versitygw refusing a
// conditional write of a large body early and closing the connection,
// an expected outcome of a lost race there.
func (c cellResult) hotResets() int64 {
	if c.Pattern != patternHot {
		return 0
	}
	return c.Resets
}

func formatInt(v *int64) string {
	if v == nil {
		return "n/a"
	}
	return strconv.FormatInt(*v, 10)
}

func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeText prints the tables, then the summary line, last.
func (r *report) writeText(w io.Writer) error {
	fmt.Fprintf(w, "fencebench %s on %d CPUs (%s), Linux %s, %s\n", r.Date, r.Machine.CPUs, r.Machine.CPUModel, r.Machine.Kernel, r.Machine.Go)
	fmt.Fprintf(w, "gateway %s (%s)", r.Config.Fencegate, r.Config.FencegateBuild)
	if r.Config.Baseline != "" {
		fmt.Fprintf(w, "; baseline %s (%s)", r.Config.Baseline, r.Config.BaselineBuild)
	}
	fmt.Fprintf(w, "\netcd fsync %v; versitygw keep-alive %v, objects on %s; gateway log level %s; stale cells' HTTP client %s; window %s per cell (%d times that at 64 writers, 1 KiB, distinct objects, %d times in the large ticket shape) in %d rounds, each after %s warm-up\n\n",
		r.Config.EtcdFsync, r.Config.S3KeepAlive, r.Config.S3Data, r.Config.GatewayLogLevel, r.Config.StaleClient, r.Config.Duration, s3APIWindows, ticketLargeWindows, r.Config.Rounds, r.Config.Warmup)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tpattern\tsize\tconc\tok/s\tp50 ms\tp99 ms\tp99.9 ms\tconflicts\terrors\t"+
		"CPU s/1k: gw\tetcd\ts3\tbench\tcores: gw\tetcd\ts3\tbench\tother\tetcd req/op\tvs direct\tvs direct-sdk\tvs clientside\t")
	for _, c := range r.Cells {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.0f\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			c.Mode, c.Pattern, byteSize(c.SizeBytes), c.Concurrency, c.RPS,
			ms(c.P50), ms(c.P99), ms(c.P999), c.Conflicts, c.Errors,
			format(c.CPUPer1000.Gateway, 3), format(c.CPUPer1000.Etcd, 3), format(c.CPUPer1000.S3, 3), format(c.CPUPer1000.Bench, 3),
			format(c.Cores.Gateway, 2), format(c.Cores.Etcd, 2), format(c.Cores.S3, 2), format(c.Cores.Bench, 2), format(c.OtherCores, 2),
			format(c.EtcdRequestsPerOp, 2), format(c.RatioVsDirect, 2), format(c.RatioVsDirectSDK, 2), format(c.RatioVsClientSide, 2))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range r.Cells {
		if c.StaleEtcdRequests != nil || c.StaleS3Requests != nil {
			fmt.Fprintf(w, "%s: requests during the cell: etcd %s, S3 %s\n", cell{c.Mode, c.Pattern, c.SizeBytes, c.Concurrency},
				formatInt(c.StaleEtcdRequests), formatInt(c.StaleS3Requests))
		}
		if c.GatewayBytesPerWrite != nil {
			fmt.Fprintf(w, "%s: the gateway read %s bytes per write (request lines, headers and bodies sent to it)\n",
				cell{c.Mode, c.Pattern, c.SizeBytes, c.Concurrency}, format(c.GatewayBytesPerWrite, 0))
		}
		for _, n := range c.Notes {
			fmt.Fprintf(w, "%s: note: %s\n", cell{c.Mode, c.Pattern, c.SizeBytes, c.Concurrency}, n)
		}
	}
	for _, u := range r.Uploads {
		fmt.Fprintf(w, "upload %s through a fresh %s: %d in %.1fs (%.0f MiB/s); RSS %.1f MiB before, %.1f MiB peak: +%.1f MiB (%d samples and VmHWM)\n",
			byteSize(u.Bytes), u.Gateway, u.Status, u.Seconds, u.MiBPerSecond, u.RSSBeforeMiB, u.RSSPeakMiB, u.RSSGrowthMiB, u.Samples)
	}
	if r.Events != nil {
		fmt.Fprint(w, r.Events.text())
	}
	_, err := fmt.Fprintln(w, r.SummaryLine)
	return err
}

func ms(m millis) string {
	if math.IsNaN(float64(m)) {
		return "n/a"
	}
	return strconv.FormatFloat(float64(m), 'f', 2, 64)
}

// machineInfo describes the machine the figures come from.
func machineInfo() machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), CPUModel: "unknown", Kernel: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if name, value, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
				m.CPUModel = strings.TrimSpace(value)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// buildOf returns the VCS revision a fencegate binary was built from, as
// `fencegate version` prints it.
func buildOf(bin string) string {
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return "unknown build"
	}
	var rev, modified string
	for line := range strings.SplitSeq(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "vcs.revision: "); ok {
			rev = v[:min(12, len(v))]
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "vcs.modified: "); ok && v == "true" {
			modified = "+modified"
		}
	}
	if rev == "" {
		return "no vcs revision"
	}
	return rev + modified
}

// progress prints a line on stderr while the run goes: rewritten in place
// on a terminal, a line per cell otherwise.
type progress struct {
	w    io.Writer
	tty  bool
	cell string
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if info, err := f.Stat(); err == nil && info.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) update(elapsed time.Duration, ok, conflicts, errs int64) {
	if !p.tty {
		return
	}
	fmt.Fprintf(p.w, "\r\033[K%s: %.1fs, %d ok (%.0f/s), %d conflicts, %d errors", p.cell, elapsed.Seconds(), ok, float64(ok)/elapsed.Seconds(), conflicts, errs)
}

func (p *progress) done(r cellResult) {
	line := fmt.Sprintf("%s: %.0f ok/s, p50 %s ms, p99 %s ms, %d conflicts, %d errors", p.cell, r.RPS, ms(r.P50), ms(r.P99), r.Conflicts, r.Errors)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s\n", line)
		return
	}
	fmt.Fprintln(p.w, line)
}

func (p *progress) note(format string, args ...any) {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *progress) clear() {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
