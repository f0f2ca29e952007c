package robustness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"fencegate/api"
)

// SuiteConfig configures a run of seeded histories on one cluster.
type SuiteConfig struct {
	// Histories is how many histories to run. Zero means 24.
	Histories int
	// Seed is the first history's seed; history i uses Seed+i.
	Seed uint64
	// FaultsPerHistory is the least number of faults per history (at
	// least 2); each history draws it or one more.
	FaultsPerHistory int
	// Kinds restricts the faults drawn. Empty means every kind.
	Kinds []FaultKind
	// Hooks are extra unsafe test hooks for the gateways (mutation runs).
	Hooks []string
	// Workload shapes the traffic. Zero means DefaultWorkload.
	Workload WorkloadConfig
	// Store puts every history's objects in one store: api.StoreS3 or
	// api.StoreGCS. Empty means a seeded third of the histories on GCS
	// (gcsHistory), the others on S3.
	Store string
	// StopAtViolation ends the run after the first history that breaks a
	// guarantee (for mutation runs, which expect one).
	StopAtViolation bool
	// RogueEviction, in retention histories, deletes the history's marks
	// behind the gateways' backs while the workload runs, whether or not
	// their objects record them (rogueEvictor): the mutation run that
	// shows the checkers catch an evictor that breaks the rule.
	RogueEviction bool
	// Dir holds the cluster's data and logs, and the visualizations of
	// failing histories. Empty means a new temporary directory, removed
	// after a run without violations.
	Dir string
	// Logf logs progress. Nil means silence.
	Logf func(format string, args ...any)
	// Out receives the figures. Nil means os.Stdout.
	Out io.Writer
}

// HistoryReport is one history's figures and verdict.
type HistoryReport struct {
	Index int
	Seed  uint64
	// Store is the store of the history's objects (api.StoreS3 or
	// api.StoreGCS); SameBytes says its writers wrote identical bytes
	// (WorkloadConfig.SameBytes).
	Store     string
	SameBytes bool
	Plan      Plan
	Summary   Summary
	Faults    map[FaultKind]int
	Check     CheckResult
	Notes     []string
	Duration  time.Duration
	// Shapes counts what the ETag-less and partner shapes did.
	Shapes ShapeFigures
	// Compaction says the history ran with a Compactor (a seeded third
	// do); Compactions is how many compactions it made, and WatchResyncs
	// how many times the HWM watcher met a compacted revision.
	Compaction                bool
	Compactions, WatchResyncs int
	// Retention says the gateways' evictors could evict marks during the
	// history (a seeded half do; see EvictorTurn); Evicted is how many
	// marks of its objects were evicted (CheckResult.Evictions).
	Retention bool
	Evicted   int
	// StaleProbes counts the writes with stale tokens sent, once the
	// workload was over, to objects whose marks were evicted
	// (probeEvicted).
	StaleProbes int
}

// retentionString is the history's retention figures, for its line.
func (h HistoryReport) retentionString() string {
	if !h.Retention {
		return fmt.Sprintf("retention=no evicted=%d", h.Evicted)
	}
	return fmt.Sprintf("retention=yes evicted=%d stale_probes=%d", h.Evicted, h.StaleProbes)
}

// compactionString is the history's compaction figures, for its line.
func (h HistoryReport) compactionString() string {
	if !h.Compaction {
		return "compaction=no"
	}
	return fmt.Sprintf("compaction=yes compactions=%d watch_resyncs=%d", h.Compactions, h.WatchResyncs)
}

// ShapeFigures counts what the newer shapes of the workload did.
type ShapeFigures struct {
	// Etagless is how many ETag-less objects were placed; EtaglessHeld
	// how many of their opening races had their first write held after
	// its fence check; EtaglessRefused how many writes to them a gateway
	// answered 502 without sending anything to S3.
	Etagless, EtaglessHeld, EtaglessRefused int
	// PartnerRequests counts partner requests, PartnerForwarded the calls
	// that reached the partner, and ImplausibleRefused the requests with
	// an implausible token answered 400 implausible-token.
	PartnerRequests, PartnerForwarded, ImplausibleRefused int
	// Multipart counts the multipart shape's uploads (MultipartFigures).
	Multipart MultipartFigures
	// Tickets counts the ticket shape's requests and writes
	// (TicketFigures).
	Tickets TicketFigures
}

// MultipartFigures counts what the multipart shape did (multipartWrite,
// staleAbort).
type MultipartFigures struct {
	// Creates counts the uploads created, Completes those completed (the
	// acked completions), Overtaken those whose holder stalled past its
	// lease before completing.
	Creates, Completes, Overtaken int
	// StaleRefused counts the parts and completions refused 409
	// StaleFenceToken.
	StaleRefused int
	// StaleAborts counts the aborts of a newer holder's upload by the
	// store's id with a stale token, and StaleAbortsRefused those the
	// gateway refused (409, or 400 for a token not below the mark).
	StaleAborts, StaleAbortsRefused int
}

// multipartFigures counts the multipart shape's uploads in ops.
func multipartFigures(ops []Op) MultipartFigures {
	var f MultipartFigures
	for _, op := range ops {
		switch {
		case op.Kind == OpUploadCreate && op.Outcome == Acked:
			f.Creates++
			if op.Stale {
				f.Overtaken++
			}
		case op.Kind == OpWrite && op.Upload != "" && op.Outcome == Acked:
			f.Completes++
		case op.Kind == OpUploadAbort && op.ByStoreID:
			f.StaleAborts++
			if op.Outcome == RefusedStale || op.Outcome == Refused {
				f.StaleAbortsRefused++
			}
		}
		if (op.Kind == OpUploadPart || op.Kind == OpWrite && op.Upload != "") && op.Outcome == RefusedStale {
			f.StaleRefused++
		}
	}
	return f
}

// add adds o's counts to f's.
func (f *MultipartFigures) add(o MultipartFigures) {
	f.Creates += o.Creates
	f.Completes += o.Completes
	f.Overtaken += o.Overtaken
	f.StaleRefused += o.StaleRefused
	f.StaleAborts += o.StaleAborts
	f.StaleAbortsRefused += o.StaleAbortsRefused
}

// String is the figures, for a history's line.
func (f MultipartFigures) String() string {
	return fmt.Sprintf("mp_creates=%d mp_completes=%d mp_overtaken=%d mp_stale_refused=%d mp_stale_aborts=%d mp_stale_aborts_refused=%d",
		f.Creates, f.Completes, f.Overtaken, f.StaleRefused, f.StaleAborts, f.StaleAbortsRefused)
}

// add adds o's counts to f's.
func (f *ShapeFigures) add(o ShapeFigures) {
	f.Etagless += o.Etagless
	f.EtaglessHeld += o.EtaglessHeld
	f.EtaglessRefused += o.EtaglessRefused
	f.PartnerRequests += o.PartnerRequests
	f.PartnerForwarded += o.PartnerForwarded
	f.ImplausibleRefused += o.ImplausibleRefused
	f.Multipart.add(o.Multipart)
	f.Tickets.add(o.Tickets)
}

// String is the figures, for a history's line.
func (f ShapeFigures) String() string {
	var parts []string
	if f.Etagless > 0 {
		parts = append(parts, fmt.Sprintf("etagless=%d held=%d etagless_refused=%d", f.Etagless, f.EtaglessHeld, f.EtaglessRefused))
	}
	if f.PartnerRequests > 0 {
		parts = append(parts, fmt.Sprintf("partner_requests=%d forwarded=%d implausible_refused=%d", f.PartnerRequests, f.PartnerForwarded, f.ImplausibleRefused))
	}
	if f.Multipart != (MultipartFigures{}) {
		parts = append(parts, f.Multipart.String())
	}
	if f.Tickets != (TicketFigures{}) {
		parts = append(parts, f.Tickets.String())
	}
	return strings.Join(parts, " ")
}

// shapeFigures counts what the shapes did in a history, from its evidence
// and the checkers' findings.
func shapeFigures(ev Evidence, etaglessHeld int, findings []Finding) ShapeFigures {
	f := ShapeFigures{EtaglessHeld: etaglessHeld, Multipart: multipartFigures(ev.Ops), Tickets: ticketFigures(ev.Ops, findings)}
	seeded := make(map[string]bool)
	for _, op := range ev.Ops {
		if op.Kind == OpSeed {
			seeded[op.Key] = true
			f.Etagless++
		}
	}
	reachedS3 := make(map[string]bool)
	for _, w := range ev.Writes {
		reachedS3[w.Op] = true
	}
	for _, op := range ev.Ops {
		if op.Kind.changes() && seeded[op.Key] && op.Status == http.StatusBadGateway && !reachedS3[op.ID] {
			f.EtaglessRefused++
		}
	}
	if ev.Partner != nil {
		f.PartnerRequests = len(ev.Partner.Ops)
		f.PartnerForwarded = len(ev.Partner.Calls)
		for _, op := range ev.Partner.Ops {
			for _, a := range op.Attempts {
				if a.ProblemType == api.ProblemTypePrefix+"implausible-token" {
					f.ImplausibleRefused++
					break
				}
			}
		}
	}
	return f
}

// StoreFigures counts one store's histories, and what the checkers found
// in them.
type StoreFigures struct {
	Histories, Violations, ABA int
	// ABARefused counts the writes refused in the ETag ABA shape
	// (CheckResult.ABARefused; GCS only).
	ABARefused int
}

// SuiteReport sums up a run.
type SuiteReport struct {
	Histories []HistoryReport
	// Stores counts the histories, violations and etag-aba findings of
	// each store (api.StoreS3, api.StoreGCS).
	Stores map[string]*StoreFigures
	// SameBytes counts the histories whose writers wrote identical bytes.
	SameBytes    int
	Faults       map[FaultKind]int
	S3Injections map[string]int
	Ops          int
	StaleRefused int
	Ambiguous    int
	Shapes       ShapeFigures
	// Compacted counts the histories that ran with a Compactor.
	Compacted int
	// Retained counts the histories that ran with mark retention, and
	// Evicted the marks evicted in all histories.
	Retained, Evicted int
	Violations        int
	// Findings counts the named findings (documented limits seen at
	// work, not violations) by name.
	Findings map[string]int
	Duration time.Duration
	// Dir is where the run's logs and artifacts are (kept when a history
	// failed).
	Dir string
}

// FinalLine is the one line that ends every run.
func (r SuiteReport) FinalLine() string {
	faults := 0
	for _, n := range r.Faults {
		faults += n
	}
	s3, gcs := r.store(api.StoreS3), r.store(api.StoreGCS)
	return fmt.Sprintf("robustness: histories=%d s3=%d gcs=%d same_bytes=%d faults=%d ops=%d stale_refused=%d ambiguous=%d "+
		"etagless=%d etagless_refused=%d partner_requests=%d partner_forwarded=%d implausible_refused=%d compacted=%d retention=%d evicted=%d "+
		"%s %s aba=%d s3_aba=%d tk_aba=%d gcs_aba=%d gcs_aba_refused=%d violations=%d s3_violations=%d gcs_violations=%d",
		len(r.Histories), s3.Histories, gcs.Histories, r.SameBytes, faults, r.Ops, r.StaleRefused, r.Ambiguous,
		r.Shapes.Etagless, r.Shapes.EtaglessRefused, r.Shapes.PartnerRequests, r.Shapes.PartnerForwarded, r.Shapes.ImplausibleRefused,
		r.Compacted, r.Retained, r.Evicted, r.Shapes.Multipart, r.Shapes.Tickets, r.Findings["etag-aba"], s3.ABA, r.Shapes.Tickets.ABA, gcs.ABA, gcs.ABARefused,
		r.Violations, s3.Violations, gcs.Violations)
}

// store returns the figures of store (zero if it ran no history).
func (r SuiteReport) store(name string) StoreFigures {
	if f := r.Stores[name]; f != nil {
		return *f
	}
	return StoreFigures{}
}

// add counts h in the figures of its store.
func (r *SuiteReport) add(h HistoryReport) {
	if r.Stores == nil {
		r.Stores = make(map[string]*StoreFigures)
	}
	f := r.Stores[h.Store]
	if f == nil {
		f = &StoreFigures{}
		r.Stores[h.Store] = f
	}
	f.Histories++
	f.Violations += len(h.Check.Violations)
	f.ABARefused += h.Check.ABARefused
	for _, finding := range h.Check.Findings {
		if finding.Name == "etag-aba" {
			f.ABA++
		}
	}
	if h.SameBytes {
		r.SameBytes++
	}
}

// FaultsLine lists the faults injected by kind, and the writes the S3
// proxy hit.
func (r SuiteReport) FaultsLine() string {
	var parts []string
	for _, k := range sortedKinds(r.Faults) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, r.Faults[k]))
	}
	var hits []string
	for _, k := range []string{"s3-error-before", "s3-error-after", "s3-drop-after"} {
		hits = append(hits, fmt.Sprintf("%s=%d", k, r.S3Injections[k]))
	}
	return "robustness: faults by kind: " + strings.Join(parts, " ") + " (writes hit: " + strings.Join(hits, " ") + ")"
}

// findingsString counts findings by name: "etag-aba=1".
func findingsString(findings []Finding) string {
	counts := make(map[string]int)
	var names []string
	for _, f := range findings {
		if counts[f.Name] == 0 {
			names = append(names, f.Name)
		}
		counts[f.Name]++
	}
	var parts []string
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s=%d", name, counts[name]))
	}
	return strings.Join(parts, " ")
}

// RunSuite builds the binaries, starts a cluster, runs the histories one
// after another on fresh objects, checks each, and prints the figures.
func RunSuite(ctx context.Context, cfg SuiteConfig) (SuiteReport, error) {
	start := time.Now()
	if cfg.Histories == 0 {
		cfg.Histories = 24
	}
	if cfg.FaultsPerHistory < 2 {
		cfg.FaultsPerHistory = 2
	}
	if cfg.Workload == (WorkloadConfig{}) {
		cfg.Workload = DefaultWorkload
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	report := SuiteReport{Faults: make(map[FaultKind]int), Findings: make(map[string]int), Stores: make(map[string]*StoreFigures)}
	dir := cfg.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "fencegate-robustness-"); err != nil {
			return report, err
		}
	}
	report.Dir = dir
	bins, err := BuildBinaries(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		return report, err
	}
	clusterCfg := ClusterConfig{Dir: filepath.Join(dir, "cluster"), Hooks: cfg.Hooks, Logf: cfg.Logf, Seed: cfg.Seed, MarkRetention: markRetention}
	if cfg.Workload.PartnerShare > 0 {
		// Tokens are revisions of this etcd cluster (concurrency.Mutex):
		// plausible is the policy that fits them, and "*" is the entry
		// that covers partner resources.
		clusterCfg.TokenChecks = "*=plausible"
	}
	cluster, err := StartCluster(ctx, clusterCfg, bins)
	if err != nil {
		return report, err
	}
	defer cluster.Close()
	watcher := StartWatcher(cluster.Client)
	defer watcher.Close()
	clock := StartRevisionClock(cluster.Client, 50*time.Millisecond)
	defer clock.Close()
	turn := NewEvictorTurn(cluster.Client)
	objects, err := newObjectReader(cluster)
	if err != nil {
		return report, err
	}
	gcsObjects := newGCSObjectReader(cluster)
	defer gcsObjects.http.CloseIdleConnections()
	cfg.Logf("robustness: %d histories from seed %d; cluster and logs in %s", cfg.Histories, cfg.Seed, dir)

	for i := range cfg.Histories {
		if ctx.Err() != nil {
			return report, ctx.Err()
		}
		h, err := runHistory(ctx, cfg, cluster, historyEnv{watcher, clock, turn, gcsObjects}, objects, i, cfg.Seed+uint64(i), dir)
		if err != nil {
			return report, fmt.Errorf("history %d (seed %d): %w", i, cfg.Seed+uint64(i), err)
		}
		report.Histories = append(report.Histories, h)
		report.add(h)
		for k, n := range h.Faults {
			report.Faults[k] += n
		}
		report.Ops += h.Summary.Ops
		report.StaleRefused += h.Summary.StaleRefused
		report.Ambiguous += h.Summary.Ambiguous
		report.Shapes.add(h.Shapes)
		report.Violations += len(h.Check.Violations)
		if h.Compaction {
			report.Compacted++
		}
		if h.Retention {
			report.Retained++
		}
		report.Evicted += h.Evicted
		for _, f := range h.Check.Findings {
			report.Findings[f.Name]++
		}
		shapes := ""
		if s := h.Shapes.String(); s != "" {
			shapes = " shapes: " + s
		}
		if s := findingsString(h.Check.Findings); s != "" {
			shapes += " findings: " + s
		}
		if h.Shapes.Tickets.ABA > 0 {
			shapes += fmt.Sprintf(" tk_aba=%d", h.Shapes.Tickets.ABA)
		}
		if h.Check.ABARefused > 0 {
			shapes += fmt.Sprintf(" aba_refused=%d", h.Check.ABARefused)
		}
		fmt.Fprintf(cfg.Out, "robustness: history %d seed=%d store=%s same_bytes=%s ops=%d acked=%d stale_refused=%d refused=%d ambiguous=%d reads=%d porcupine=%s violations=%d %s (%v, acked writes %v) faults: %s%s\n",
			i, h.Seed, h.Store, yesNo(h.SameBytes), h.Summary.Ops, h.Summary.Acked, h.Summary.StaleRefused, h.Summary.Refused, h.Summary.Ambiguous,
			h.Summary.Reads, h.Check.Linearizability, len(h.Check.Violations), h.compactionString()+" "+h.retentionString(), h.Duration.Round(time.Millisecond),
			h.Summary.AckedLatency.Round(time.Millisecond), h.Plan, shapes)
		for _, f := range h.Check.Findings {
			fmt.Fprintf(cfg.Out, "robustness:   finding %s\n", f)
		}
		if len(h.Check.Violations) > 0 {
			fmt.Fprintf(cfg.Out, "robustness: history %d FAILED; replay with ROBUSTNESS_SEED=%d ROBUSTNESS_HISTORIES=1 (plan: %s)\n", i, h.Seed, h.Plan)
			for _, v := range h.Check.Violations {
				fmt.Fprintf(cfg.Out, "robustness:   %s\n", v)
			}
			for _, n := range h.Notes {
				fmt.Fprintf(cfg.Out, "robustness:   nemesis: %s\n", n)
			}
			if cfg.StopAtViolation {
				break
			}
		}
	}
	report.S3Injections = cluster.S3Proxy.InjectedFaults()
	for k, n := range cluster.GCSProxy.InjectedFaults() {
		report.S3Injections[k] += n
	}
	report.Duration = time.Since(start)
	fmt.Fprintf(cfg.Out, "robustness: seed=%d wall=%v cluster=%d etcd members, %d gateways, versitygw, fake-gcs-server; logs in %s (kept when a history fails)\n",
		cfg.Seed, report.Duration.Round(time.Second), len(cluster.Members), len(cluster.Gateways), dir)
	fmt.Fprintln(cfg.Out, report.FaultsLine())
	fmt.Fprintln(cfg.Out, report.FinalLine())
	return report, nil
}

// historyEnv is what the suite keeps across histories besides the
// cluster: the HWM watcher, etcd's revision clock, the switch of mark
// eviction, and the reader of GCS objects.
type historyEnv struct {
	watcher    *Watcher
	clock      *RevisionClock
	turn       *EvictorTurn
	gcsObjects *gcsObjectReader
}

// yesNo is b in a history's line.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// withPause returns plan with its first fault a pause after a fence check
// (PauseAfterFence), if it has none and kinds (empty: every kind) allows
// it: a history of identical bytes holds at least one write after its
// fence check, the ABA shape's stall.
func withPause(plan Plan, kinds []FaultKind) Plan {
	if len(plan) == 0 || len(kinds) > 0 && !slices.Contains(kinds, PauseAfterFence) ||
		slices.ContainsFunc(plan, func(f Fault) bool { return f.Kind == PauseAfterFence }) {
		return plan
	}
	plan = slices.Clone(plan)
	plan[0].Kind = PauseAfterFence
	return plan
}

// gcsHistory reports whether the history of seed writes to GCS, not S3: a
// seeded third do.
func gcsHistory(seed uint64) bool {
	return rand.New(rand.NewPCG(seed, 0x6c5)).IntN(3) == 0
}

// historyStore is the store of the history of seed: cfg.Store, or by
// gcsHistory.
func historyStore(cfg SuiteConfig, seed uint64) string {
	switch {
	case cfg.Store != "":
		return cfg.Store
	case gcsHistory(seed):
		return api.StoreGCS
	}
	return api.StoreS3
}

// runHistory runs one history: the workload and the nemesis together,
// then heals, reads back, and checks.
func runHistory(ctx context.Context, cfg SuiteConfig, cluster *Cluster, env historyEnv, objects *minio.Client, index int, seed uint64, dir string) (HistoryReport, error) {
	start := time.Now()
	watcher := env.watcher
	env.clock.Forget(start.Add(-10 * time.Second))
	store := historyStore(cfg, seed)
	// Mark retention evicts the marks of S3 objects only (package
	// retention reads S3): a GCS history runs with eviction off.
	retention := retentionHistory(seed) && store == api.StoreS3
	switchTurn := env.turn.Off
	if retention {
		switchTurn = env.turn.On
	}
	if err := switchTurn(ctx); err != nil {
		return HistoryReport{}, err
	}
	rnd := rand.New(rand.NewPCG(seed, 0xfa017))
	plan := DrawPlan(rnd, cfg.FaultsPerHistory+rnd.IntN(2), cfg.Kinds)
	prefix := fmt.Sprintf("h%d-%d/", index, seed)
	// The shapes are drawn from a source of their own, so that a seed
	// draws the same plan with or without them.
	workload := NewWorkload(cfg.Workload.forHistory(rand.New(rand.NewPCG(seed, 0x5ba9e))).onStore(store), cluster, prefix)
	defer workload.Close()
	if err := workload.PlaceEtagless(); err != nil {
		return HistoryReport{}, err
	}
	if workload.cfg.SameBytes {
		plan = withPause(plan, cfg.Kinds)
	}
	nemesis := NewNemesis(cluster, workload, watcher, cfg.Logf)
	compaction := compactionHistory(seed)
	resyncs := watcher.Resyncs()
	var compactor *Compactor
	if compaction {
		compactor = StartCompactor(cluster.Client, compactEvery)
	}
	compactions := 0
	stopCompactor := func() {
		if compactor != nil {
			compactions = compactor.Stop()
			compactor = nil
		}
	}
	defer stopCompactor()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { workload.Run(ctx, seed, stop) })
	if cfg.RogueEviction && retention {
		wg.Go(func() { rogueEvictor(ctx, cluster, workload, stop) })
	}
	nemesisCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	nemesis.Run(nemesisCtx, workload.History().start, plan)
	cancel()
	select {
	case <-time.After(300 * time.Millisecond):
	case <-ctx.Done():
	}
	close(stop)
	stopCompactor()
	// A client can be stuck in an etcd call that only a healed cluster
	// answers (concurrency.Mutex cleans up after a failed Lock with no
	// deadline): heal before waiting for all of them.
	clientsDone := make(chan struct{})
	go func() { wg.Wait(); close(clientsDone) }()
	select {
	case <-clientsDone:
	case <-time.After(10 * time.Second):
	}
	if err := cluster.Heal(ctx); err != nil {
		return HistoryReport{}, fmt.Errorf("heal: %w", err)
	}
	select {
	case <-clientsDone:
	case <-time.After(60 * time.Second):
		return HistoryReport{}, errors.New("workload clients still running 60 s after the cluster healed")
	}
	probes := 0
	if retention {
		// Let the evictors evict what the objects record, then write with
		// stale tokens to the objects whose marks are gone.
		awaitEvictions(ctx, cluster, objects, workload)
		probes = probeEvicted(ctx, cluster, objects, workload)
	}
	workload.FinalReads(ctx)
	ev, err := gatherEvidence(ctx, cluster, watcher, env.clock, objects, env.gcsObjects, workload)
	if err != nil {
		return HistoryReport{}, err
	}
	ev.Retention = retention
	check := Check(ev, CheckConfig{ArtifactDir: filepath.Join(dir, "artifacts"), Name: fmt.Sprintf("history-%d-seed-%d", index, seed)})
	return HistoryReport{
		Index: index, Seed: seed, Store: store, SameBytes: workload.cfg.SameBytes, Plan: plan,
		Summary: Summarize(ev.Ops), Faults: nemesis.Injected(), Check: check, Notes: nemesis.Notes(),
		Duration: time.Since(start), Shapes: shapeFigures(ev, workload.EtaglessHeld(), check.Findings),
		Compaction: compaction, Compactions: compactions, WatchResyncs: watcher.Resyncs() - resyncs,
		Retention: retention, Evicted: check.Evictions, StaleProbes: probes,
	}, nil
}

// gatherEvidence reads what the checkers need: the history, the S3
// proxy's record, the watch record, the marks and the objects.
//
// Evictors may go on deleting marks while it reads (the workload is over,
// the gateways are not): so the marks are read at one revision, the
// members' views at that same revision, and the watch record up to it.
// Each watch event gets the bounds of when it happened (HWMEvent.After
// and Before) from clock.
func gatherEvidence(ctx context.Context, cluster *Cluster, watcher *Watcher, clock *RevisionClock, objects *minio.Client, gcsObjects *gcsObjectReader, workload *Workload) (Evidence, error) {
	ev := Evidence{
		Ops:       workload.History().Ops(),
		Keys:      workload.Keys(),
		HWMEvents: make(map[string][]HWMEvent),
		FinalHWM:  make(map[string]api.Token),
		MemberHWM: make(map[string]map[string]api.Token),
		Final:     make(map[string]ObjectState),
		Store:     workload.cfg.store(),
	}
	proxy := cluster.S3Proxy
	if ev.gcs() {
		proxy = cluster.GCSProxy
	}
	ev.Writes = proxy.Writes(ev.bucket() + "/" + workload.prefix)
	markPrefix := HWMPrefix + workload.resourcePrefix()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cluster.Client.Get(rctx, markPrefix+workload.prefix, clientv3.WithPrefix())
	if err != nil {
		return ev, fmt.Errorf("read marks: %w", err)
	}
	for _, kv := range resp.Kvs {
		t, _ := decodeStoredToken(kv.Value)
		ev.FinalHWM[strings.TrimPrefix(string(kv.Key), markPrefix)] = t
	}
	if err := watcher.Sync(ctx, 15*time.Second); err != nil {
		return ev, err
	}
	ev.WatchErr = watcher.Err()
	for key, events := range watcher.Events(markPrefix + workload.prefix) {
		var upTo []HWMEvent
		for _, e := range events {
			if e.Revision > resp.Header.Revision {
				break
			}
			after, before := clock.Bounds(e.Revision)
			e.After = after
			if !before.IsZero() && (e.Before.IsZero() || before.Before(e.Before)) {
				e.Before = before
			}
			upTo = append(upTo, e)
		}
		if len(upTo) > 0 {
			ev.HWMEvents[strings.TrimPrefix(key, markPrefix)] = upTo
		}
	}
	views, err := memberViews(rctx, cluster, markPrefix, workload.prefix, resp.Header.Revision)
	if err != nil {
		return ev, err
	}
	ev.MemberHWM = views
	if len(workload.Accounts()) > 0 && workload.cfg.PartnerClients > 0 {
		if ev.Partner, err = partnerEvidence(rctx, cluster, watcher, workload, resp.Header.Revision); err != nil {
			return ev, err
		}
	}
	for _, key := range ev.Keys {
		var state ObjectState
		if ev.gcs() {
			state, err = gcsObjects.read(rctx, key)
		} else {
			state, err = readObject(rctx, objects, key)
		}
		if err != nil {
			return ev, err
		}
		ev.Final[key] = state
	}
	return ev, nil
}

// partnerEvidence reads what the partner checkers need: the requests, the
// partner's record, and the accounts' marks (through a gateway, and from
// the watch record). revision is etcd's, read after the history.
func partnerEvidence(ctx context.Context, cluster *Cluster, watcher *Watcher, workload *Workload, revision int64) (*PartnerEvidence, error) {
	pe := &PartnerEvidence{
		Accounts:  workload.Accounts(),
		Ops:       workload.PartnerOps(),
		Calls:     cluster.Partner.Calls(workload.accountPrefix()),
		HWMEvents: make(map[string][]HWMEvent),
		Revision:  revision,
	}
	markPrefix := HWMPrefix + string(PartnerResource(""))
	for key, events := range watcher.Events(markPrefix + workload.accountPrefix()) {
		pe.HWMEvents[strings.TrimPrefix(key, markPrefix)] = events
	}
	var err error
	if pe.HWM, err = workload.PartnerFences(ctx); err != nil {
		return nil, err
	}
	return pe, nil
}

// memberViews reads the marks from each member alone (serializable), as
// they were at revision rev, once the member has applied it.
func memberViews(ctx context.Context, cluster *Cluster, markPrefix, prefix string, rev int64) (map[string]map[string]api.Token, error) {
	views := make(map[string]map[string]api.Token)
	for _, m := range cluster.Members {
		client, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return nil, err
		}
		var resp *clientv3.GetResponse
		deadline := time.Now().Add(5 * time.Second)
		for {
			resp, err = client.Get(ctx, markPrefix+prefix, clientv3.WithPrefix(), clientv3.WithSerializable(), clientv3.WithRev(rev))
			if err == nil && resp.Header.Revision >= rev || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = client.Close()
		if err != nil {
			return nil, fmt.Errorf("read marks from %s: %w", m.Name, err)
		}
		view := make(map[string]api.Token)
		for _, kv := range resp.Kvs {
			t, _ := decodeStoredToken(kv.Value)
			view[strings.TrimPrefix(string(kv.Key), markPrefix)] = t
		}
		views[m.Name] = view
	}
	return views, nil
}

// newObjectReader returns a client that reads versitygw directly, with
// another S3 library than the gateway's.
func newObjectReader(cluster *Cluster) (*minio.Client, error) {
	return minio.New(strings.TrimPrefix(cluster.S3.Endpoint(), "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(cluster.S3.AccessKey, cluster.S3.SecretKey, ""), Region: cluster.S3.Region,
	})
}

// newGCSObjectReader returns a reader of GCSBucket's objects straight
// from fake-gcs-server, with plain HTTP requests.
func newGCSObjectReader(cluster *Cluster) *gcsObjectReader {
	return &gcsObjectReader{base: "http://" + cluster.GCS.Host(), bucket: GCSBucket, http: &http.Client{Timeout: 10 * time.Second}}
}

// readObject reads key straight from versitygw, not through a gateway.
func readObject(ctx context.Context, objects *minio.Client, key string) (ObjectState, error) {
	obj, err := objects.GetObject(ctx, Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return ObjectState{}, fmt.Errorf("read %s: %w", key, err)
	}
	defer obj.Close()
	info, err := obj.Stat()
	if err != nil {
		if resp := minio.ToErrorResponse(err); resp.Code == "NoSuchKey" || resp.StatusCode == http.StatusNotFound {
			return ObjectState{}, nil
		}
		return ObjectState{}, fmt.Errorf("read %s: %w", key, err)
	}
	body, err := io.ReadAll(io.LimitReader(obj, 64<<10))
	if err != nil {
		return ObjectState{}, fmt.Errorf("read %s: %w", key, err)
	}
	state := ObjectState{Exists: true, Op: opOf(body, info.ContentType)}
	for k, v := range info.UserMetadata {
		if strings.EqualFold(k, api.MetadataFenceToken) {
			state.Token, _ = api.ParseToken(v)
		}
	}
	return state, nil
}
