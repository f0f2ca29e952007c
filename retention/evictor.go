package retention

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"fencegate/api"
)

// MarkStore reads and evicts high-water marks. tokenstore.Store
// implements it.
type MarkStore interface {
	// Marks reads up to limit marks of resources that start with prefix
	// and sort after after, in resource order, each with the store
	// revision of its last raise.
	Marks(ctx context.Context, prefix, after api.Resource, limit int) (api.MarkPage, error)
	// EvictMark deletes mark if its revision is still mark.Revision (it
	// was not raised since it was read), and reports whether it did. An
	// error means it may or may not have.
	EvictMark(ctx context.Context, mark api.Mark) (bool, error)
}

// Turns gives one holder at a time a turn.
type Turns interface {
	// HoldTurn takes turn name for holder, or renews it for ttl, and
	// reports whether holder has it (one holder at a time, until it
	// stops renewing for ttl).
	HoldTurn(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
}

// RevisionRecorder keeps revisions with their ages in the store, where
// they outlive the process.
type RevisionRecorder interface {
	// RecordRevision notes the store's current revision, to be read back
	// by RevisionAges for ttl.
	RecordRevision(ctx context.Context, ttl time.Duration) (int64, error)
	// RevisionAges returns the revisions noted, each with an age that
	// never exceeds the time since it was reached.
	RevisionAges(ctx context.Context) ([]api.RevisionAge, error)
}

// Uploads tells which resources have multipart uploads in progress.
type Uploads interface {
	// ResourcesUploading returns the resources of every upload bound
	// when it reads, linearizably: a binding that exists from before the
	// call until its end is in the answer. An error means it could not
	// tell.
	ResourcesUploading(ctx context.Context) (map[api.Resource]bool, error)
}

// Store is what an Evictor needs of the token store. tokenstore.Store
// implements it.
type Store interface {
	MarkStore
	Turns
	RevisionRecorder
	Uploads
}

// ObjectObserver observes objects. The S3 and GCS backends implement it,
// and so does the router of both (backends/stores).
type ObjectObserver interface {
	// Observe returns the object's current version with the token it
	// records, or Exists false when it found none; that may also be a
	// missing bucket or a 404 that did not come from the store.
	Observe(ctx context.Context, path api.ObjectPath) (api.ObjectVersion, error)
	// ConfirmAbsent reports whether the store says that the bucket
	// exists and holds no object named path.Key (S3's NoSuchKey); false
	// with no error when the object exists. Any other answer is an
	// error: the evictor then keeps the mark.
	ConfirmAbsent(ctx context.Context, path api.ObjectPath) (bool, error)
}

// objectPrefix starts the resource names of S3 objects, the only marks
// ever evicted.
const objectPrefix = api.Resource("s3/")

// Reasons a scanned mark was kept (fencegate_marks_kept_total's reason).
const (
	keptYoung     = "young"      // raised less than the retention ago
	keptDiffers   = "differs"    // the object records another token (or none)
	keptTombstone = "tombstone"  // the object is absent, within the tombstone retention
	keptRaised    = "raised"     // raised between the read and the eviction
	keptUnknown   = "unobserved" // the HEAD or the eviction failed
	keptNotObject = "not_object" // not a valid object name
	// keptUploading: the object is absent and a multipart upload of it
	// is in progress (bound in etcd).
	keptUploading = "uploading"
	// keptUnconfirmed: the object looked absent, but the store did not
	// say "no such key" of the mark's bucket (a missing bucket, a
	// proxy's bare 404, a failure).
	keptUnconfirmed = "unconfirmed"
)

// Kinds of evicted marks (fencegate_marks_evicted_total's kind).
const (
	evictedObject    = "object"
	evictedTombstone = "tombstone"
)

// turnName is the turn (MarkStore.HoldTurn) that evictors take so that
// one at a time makes passes.
const turnName = "mark-evictor"

// minTurnTTL is the least time a turn outlives its holder's last renewal.
const minTurnTTL = 30 * time.Second

// Evictor evicts the marks that the package's rule allows, a pass over
// every object mark at a time.
//
// Every gateway may run one: Run makes passes only while its Evictor
// holds the etcd turn "mark-evictor", renewed at each page, so that one
// gateway at a time reads the marks and sends HEADs, and the others only
// sample etcd's revision to keep their clocks for when the turn comes to
// them. Correctness does not depend on the turn (a holder paused past
// its lease may still be evicting when the next starts): each eviction
// compares the mark's mod revision, so no evictor loses a raise, and
// concurrent evictors only repeat each other's HEADs.
type Evictor struct {
	cfg     Config
	marks   Store
	objects ObjectObserver
	clock   *revisionClock
	pace    *pacer
	stats   *stats
	// passing lets one pass run at a time.
	passing sync.Mutex
	// turnTTL is how long the turn outlives its last renewal.
	turnTTL time.Duration
	// recordEvery is the least time between two revisions recorded in
	// etcd (and between two reads of them), and recordTTL how long each
	// is kept there (see loadRecorded); lastLoad is when they were last
	// read, on Config.Now's clock, zero before the first read.
	recordEvery, recordTTL time.Duration
	lastLoad               time.Time
	// beforeEvict, when not nil, runs between a mark's observation and
	// its eviction (tests).
	beforeEvict func(ctx context.Context, mark api.Mark)
}

// New returns an Evictor of the marks in store, observing objects through
// objects. Start it with Run.
func New(cfg Config, store Store, objects ObjectObserver) (*Evictor, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if store == nil || objects == nil {
		return nil, errors.New("retention: nil store or object observer")
	}
	keep := max(cfg.Retention, cfg.TombstoneRetention)
	recordEvery := max(keep/256, time.Second) // ages come in whole seconds
	return &Evictor{
		cfg:     cfg,
		marks:   store,
		objects: objects,
		clock:   newRevisionClock(keep),
		pace:    newPacer(cfg.HeadsPerSecond),
		stats:   newStats(),
		// Four pages' HEADs at the paced rate, so that a holder renews
		// well within the lease.
		turnTTL: max(minTurnTTL, 4*time.Duration(float64(cfg.PageSize)/cfg.HeadsPerSecond*float64(time.Second))),
		// The newest revision at least keep old must still be there: it
		// is at most about recordEvery older than keep.
		recordEvery: recordEvery,
		recordTTL:   keep + 4*recordEvery + time.Minute,
	}, nil
}

// Run makes a pass over the marks every Config.Interval (measured from
// the end of one pass to the start of the next) while it holds the
// evictors' turn, and samples etcd's revision when it does not, until ctx
// ends; then it returns nil. A pass that fails is logged and counted, and
// the next one starts over. With eviction turned off (a negative
// Retention) it returns at once.
func (e *Evictor) Run(ctx context.Context) error {
	if e.cfg.Retention < 0 {
		return nil
	}
	e.cfg.Logger.Info("evicting high-water marks that their objects record",
		"retention", e.cfg.Retention, "tombstone_retention", e.cfg.TombstoneRetention,
		"heads_per_second", e.cfg.HeadsPerSecond, "holder", e.cfg.Holder)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		held, err := e.marks.HoldTurn(ctx, turnName, e.cfg.Holder, e.turnTTL)
		switch {
		case err == nil && held:
			err = e.pass(ctx, true)
		case err == nil:
			err = e.sample(ctx)
		}
		if err != nil && ctx.Err() == nil {
			e.stats.failedPasses.Add(1)
			e.cfg.Logger.Warn("mark eviction pass failed; the next pass starts over", "err", err, "next_in", e.cfg.Interval)
		}
		timer.Reset(e.cfg.Interval)
	}
}

// sample records etcd's current revision on the clock, with a read of
// one mark: an evictor whose turn it is not keeps its clock this way.
func (e *Evictor) sample(ctx context.Context) error {
	page, err := e.marks.Marks(ctx, objectPrefix, "", 1)
	if err != nil {
		return fmt.Errorf("mark eviction: %w", err)
	}
	e.clock.record(e.cfg.Now(), page.Revision)
	return nil
}

// cutoffs are the largest mod revisions old enough for eviction, as the
// clock knows at one moment; zero evicts nothing.
type cutoffs struct {
	object    int64 // raised at least Retention ago
	tombstone int64 // raised at least TombstoneRetention ago; 0 if kept for ever
}

func (e *Evictor) cutoffs(now time.Time) cutoffs {
	c := cutoffs{object: e.clock.revisionAt(now.Add(-e.cfg.Retention))}
	if e.cfg.TombstoneRetention > 0 {
		c.tombstone = e.clock.revisionAt(now.Add(-e.cfg.TombstoneRetention))
	}
	return c
}

// Pass reads every object mark once, in pages, and evicts those the rule
// allows; Run calls it. It returns ctx's error when ctx ends, and the
// error of a page it could not read; a mark it cannot decide (the HEAD
// failed) is kept and counted, and the pass goes on. Passes run one at a
// time: a call waits for the pass under way. Pass does not take the
// evictors' turn (Run does). With eviction turned off (a negative
// Retention) it does nothing.
func (e *Evictor) Pass(ctx context.Context) error {
	if e.cfg.Retention < 0 {
		return nil
	}
	return e.pass(ctx, false)
}

// pass is Pass; with keepTurn it renews the evictors' turn before each
// page after the first, and stops when another evictor has it.
func (e *Evictor) pass(ctx context.Context, keepTurn bool) error {
	e.passing.Lock()
	defer e.passing.Unlock()
	e.loadRecorded(ctx)
	start := e.cfg.Now()
	var after api.Resource
	var scanned, evicted int64
	for {
		if keepTurn && after != "" {
			held, err := e.marks.HoldTurn(ctx, turnName, e.cfg.Holder, e.turnTTL)
			if err != nil {
				return fmt.Errorf("mark eviction: %w", err)
			}
			if !held {
				e.cfg.Logger.Info("mark eviction pass stopped: another gateway has the evictors' turn", "scanned", scanned, "evicted", evicted)
				return nil
			}
		}
		page, err := e.marks.Marks(ctx, objectPrefix, after, e.cfg.PageSize)
		if err != nil {
			return fmt.Errorf("mark eviction: %w", err)
		}
		now := e.cfg.Now() // after the answer: page.Revision was reached by now
		e.clock.record(now, page.Revision)
		cut := e.cutoffs(now)
		pg := &pageState{cut: cut}
		for _, m := range page.Marks {
			if err := ctx.Err(); err != nil {
				return err
			}
			scanned++
			if e.consider(ctx, m, pg) {
				evicted++
			}
		}
		if pg.unconfirmed > 0 {
			e.cfg.Logger.Warn("marks kept: their objects looked absent, but the store did not say it holds no such key (a missing bucket, a 404 that did not come from the store, a failure)",
				"marks", pg.unconfirmed, "resource", pg.firstUnconfirmed, "err", pg.unconfirmedErr)
		}
		if !page.More || len(page.Marks) == 0 {
			break
		}
		after = page.Marks[len(page.Marks)-1].Resource
	}
	end := e.cfg.Now()
	e.stats.lastPass.Store(end.UnixNano())
	e.cfg.Logger.Info("mark eviction pass done", "scanned", scanned, "evicted", evicted, "duration", end.Sub(start))
	return nil
}

// loadRecorded reads back the revisions recorded in etcd, by any evictor
// of any gateway before any restart, into the clock, and records the
// current one when the youngest there is recordEvery old or more. So a
// gateway that has just started, or just taken the turn, knows revisions
// as old as the retention, and need not run for the retention before it
// evicts anything. An age read back never exceeds the time since the
// revision was reached (tokenstore.Store.RevisionAges says why), so the
// sample (now - age, revision) is as safe as one this process took.
// Failures are logged and change nothing: the clock's own samples still
// hold. Reads are at most one per recordEvery.
func (e *Evictor) loadRecorded(ctx context.Context) {
	now := e.cfg.Now()
	if !e.lastLoad.IsZero() && now.Sub(e.lastLoad) < e.recordEvery {
		return
	}
	ages, err := e.marks.RevisionAges(ctx)
	if err != nil {
		e.cfg.Logger.Warn("reading the revisions recorded in etcd failed; the evictor's own clock still holds", "err", err)
		return
	}
	e.lastLoad = now
	youngest := time.Duration(-1)
	for _, a := range ages {
		e.clock.learn(now.Add(-a.Age), a.Revision)
		if youngest < 0 || a.Age < youngest {
			youngest = a.Age
		}
	}
	if youngest >= 0 && youngest < e.recordEvery {
		return
	}
	if _, err := e.marks.RecordRevision(ctx, e.recordTTL); err != nil {
		e.cfg.Logger.Warn("recording etcd's revision failed", "err", err)
	}
}

// pageState is what the marks of one page share: the cutoffs, the
// resources with uploads in progress (read at most once a page, after the
// page), and the marks kept because their absence was not confirmed, for
// one log line a page.
type pageState struct {
	cut cutoffs
	// uploading is nil until read.
	uploading        map[api.Resource]bool
	unconfirmed      int
	firstUnconfirmed api.Resource
	unconfirmedErr   error
}

// consider applies the rule to one mark, and reports whether it evicted
// it. The order matters: the mark (and its mod revision) was read before
// the object is observed and before the uploads in progress are read, so
// that the eviction's compare covers every raise from the read on (see
// tombstoneKept for why that closes the race with an upload's creation).
func (e *Evictor) consider(ctx context.Context, m api.Mark, pg *pageState) bool {
	cut := pg.cut
	e.stats.scanned.Add(1)
	path, ok := objectPath(m.Resource)
	if !ok {
		e.stats.kept(keptNotObject)
		return false
	}
	objectOld := m.Revision <= cut.object
	tombstoneOld := m.Revision <= cut.tombstone
	if !objectOld && !tombstoneOld {
		e.stats.kept(keptYoung)
		return false
	}
	if err := e.pace.wait(ctx); err != nil {
		return false
	}
	seen, err := e.objects.Observe(ctx, path)
	if err != nil {
		e.stats.kept(keptUnknown)
		e.cfg.Logger.Debug("mark kept: observing its object failed", "resource", m.Resource, "err", err)
		return false
	}
	kind := evictedObject
	switch {
	case !seen.Exists && !tombstoneOld:
		e.stats.kept(keptTombstone)
		return false
	case !seen.Exists:
		if reason, kept := e.tombstoneKept(ctx, m, path, pg); kept {
			e.stats.kept(reason)
			return false
		}
		kind = evictedTombstone
	case seen.Token != m.Token:
		e.stats.kept(keptDiffers)
		return false
	case !objectOld:
		e.stats.kept(keptYoung)
		return false
	}
	if e.beforeEvict != nil {
		e.beforeEvict(ctx, m)
	}
	evicted, err := e.marks.EvictMark(ctx, m)
	switch {
	case err != nil:
		e.stats.kept(keptUnknown)
		e.cfg.Logger.Debug("mark kept: evicting it failed", "resource", m.Resource, "err", err)
		return false
	case !evicted:
		e.stats.kept(keptRaised)
		return false
	}
	e.stats.evicted(kind)
	return true
}

// tombstoneKept decides what the rule leaves to the store and etcd about
// a tombstone old enough to evict (its object observed absent): it is
// kept, for the reason it returns, unless the store confirms that the
// bucket holds no such key and no multipart upload of the object is in
// progress.
//
// The store's word: a HEAD's 404 has no body, so S3 answers a missing
// bucket, and a proxy its own 404, as it answers a missing key; GCS
// answers a missing bucket as a missing object. ObjectObserver's
// ConfirmAbsent asks the store in a way that tells them apart; anything
// but a definite "no such key" keeps the mark (keptUnconfirmed).
//
// Uploads in progress: CreateMultipartUpload raises the mark of an object
// that does not exist until the upload completes, which may be as long
// after as the upload TTL, far longer than the tombstone retention; until
// then the mark alone refuses a writer below the upload's token. The
// uploads are read after the mark (the page was read before), and the
// gateway's CreateUpload binds the upload before it writes the mark at
// the upload's token (a write even when the token equals the mark, so a
// new mod revision). Either that write came after the evictor read the
// mark, and the eviction's compare of the mod revision fails; or it came
// before, and the binding, older still, is in the uploads read here,
// unless the upload ended since (completed, aborted, or its binding
// expired with the upload TTL). No timing enters.
func (e *Evictor) tombstoneKept(ctx context.Context, m api.Mark, path api.ObjectPath, pg *pageState) (string, bool) {
	if err := e.pace.wait(ctx); err != nil {
		return keptUnknown, true
	}
	absent, err := e.objects.ConfirmAbsent(ctx, path)
	switch {
	case err != nil:
		pg.unconfirmed++
		if pg.unconfirmed == 1 {
			pg.firstUnconfirmed, pg.unconfirmedErr = m.Resource, err
		}
		e.cfg.Logger.Debug("mark kept: its object looked absent, but the store did not confirm it", "resource", m.Resource, "err", err)
		return keptUnconfirmed, true
	case !absent: // created since the HEAD: the next pass decides
		return keptUnknown, true
	}
	if pg.uploading == nil {
		uploading, err := e.marks.ResourcesUploading(ctx)
		if err != nil {
			e.cfg.Logger.Debug("mark kept: reading the uploads in progress failed", "resource", m.Resource, "err", err)
			return keptUnknown, true
		}
		pg.uploading = uploading
	}
	if pg.uploading[m.Resource] {
		return keptUploading, true
	}
	return "", false
}

// objectPath returns the object whose resource name r is, if it is one.
func objectPath(r api.Resource) (api.ObjectPath, bool) {
	rest, ok := strings.CutPrefix(string(r), string(objectPrefix))
	if !ok {
		return api.ObjectPath{}, false
	}
	bucket, key, _ := strings.Cut(rest, "/")
	p, err := api.ParseObjectPath(bucket, key)
	return p, err == nil && p.Resource() == r
}

// pacer spaces the evictor's HEADs to a rate, on the real clock.
type pacer struct {
	interval time.Duration
	next     time.Time
}

func newPacer(perSecond float64) *pacer {
	return &pacer{interval: time.Duration(float64(time.Second) / perSecond)}
}

// wait returns when the next HEAD may go, or ctx's error first.
func (p *pacer) wait(ctx context.Context) error {
	now := time.Now()
	if d := p.next.Sub(now); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		now = p.next
	}
	p.next = now.Add(p.interval)
	return nil
}
