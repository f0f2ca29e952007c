package edge

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fencegate/api"
	"fencegate/events"
	"fencegate/fence"
)

// The event feed: an events.Hub of the gateway's decisions (writes
// accepted and refused, locks granted, released and expired, partner
// requests admitted, replayed and busy), which a door streams to its
// subscribers (the REST API's GET /v1/events; docs/events.md has the
// format). The hub keeps the newest decisions (Config.EventHistory,
// EventHistoryBytes) for new and resuming subscribers. It never slows the
// write path: a decision is published with a send that never waits (a
// subscriber whose buffer is full loses the event, counted, and is told
// how many it lost); without history, while nobody subscribes, publishing
// is one atomic load. Most decisions are published from the places that
// already see them whole: refusals from NoteProblem and NoteRefusal
// (audit.go); accepted object writes and deletes from the engine's
// fenced write path that every door shares (WriteAccepted,
// DeleteAccepted: publishObject); forwarded partner requests from Track
// when the request ends, with what was noted in the request's exchange on
// the way (decisionNote: by eventFences around the fence store, and by
// the partner door, NoteAdmitted); the doors' own decisions (locks,
// partner admissions) by the doors, on Events().

// decisionNote is what the event feed needs to know of a request beyond
// the rest of its exchange, noted on the way when anyone subscribes.
type decisionNote struct {
	// hwmBefore is the resource's mark as this gateway knew it before
	// the fence check or admission (zero: none known).
	hwmBefore api.Token
	// raised is set when a fence check or admission accepted the token,
	// raising the mark to it.
	raised bool
	// forwarded is set when a partner request was admitted to be
	// forwarded (not replayed).
	forwarded bool
}

// eventFeed is the edge's hub and what publishing needs beside it.
type eventFeed struct {
	hub *events.Hub
	// unauthenticated limits the write.refused events of requests
	// without valid credentials (401), as their log lines are
	// limited, with a limiter of its own (an event and a line do not
	// take each other's turn); nil when Config.AuthRefusalLogRate is
	// negative. suppressed counts the events it left out.
	unauthenticated *lineLimiter
	suppressed      prometheus.Counter
}

// newEventFeed returns the feed of a gateway configured by cfg, its
// metrics registered on m's registry.
func newEventFeed(cfg Config, m *metrics) *eventFeed {
	hub := events.NewHub(events.Config{MaxSubscribers: cfg.EventSubscribers, Buffer: cfg.EventBuffer,
		History: cfg.EventHistory, HistoryBytes: cfg.EventHistoryBytes})
	suppressed := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fencegate_events_suppressed_total",
		Help: "write.refused events of requests refused 401 (no valid credential: REST, or a bad signature on the S3 API) left out of the feed by the limit on their rate (Config.AuthRefusalLogRate and AuthRefusalLogBurst, as their log lines).",
	})
	m.registry.MustRegister(
		suppressed,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencegate_event_subscribers",
			Help: "Subscribers of the event feed (GET /v1/events) now; Config.EventSubscribers bounds them.",
		}, func() float64 { return float64(hub.Subscribers()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "fencegate_events_dropped_total",
			Help: "Events of the feed that a subscriber lost because its buffer (Config.EventBuffer) was full, over all subscribers.",
		}, func() float64 { return float64(hub.Dropped()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencegate_event_history_events",
			Help: "Decisions the event feed holds for new and resuming subscribers now; Config.EventHistory bounds them.",
		}, func() float64 { n, _ := hub.History(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fencegate_event_history_bytes",
			Help: "Memory those decisions are counted for now; Config.EventHistoryBytes bounds it.",
		}, func() float64 { _, b := hub.History(); return float64(b) }),
	)
	return &eventFeed{hub: hub,
		unauthenticated: newLineLimiter(cfg.Now, cfg.AuthRefusalLogRate, cfg.AuthRefusalLogBurst), suppressed: suppressed}
}

// admitUnauthenticated reports whether the write.refused event of a
// request refused 401 may be published, and counts it in
// fencegate_events_suppressed_total when not. Such a request costs its
// sender nothing and names the resource and token it likes: without a
// limit, a flood of them would fill every subscriber's buffer, and the
// subscribers would lose the decisions about known identities' writes in
// the drops. They are limited as their log lines are (lineLimiter, the
// 401 bucket: Config.AuthRefusalLogRate a second, AuthRefusalLogBurst at
// once, for all senders together); 403s, which only a known identity
// gets, are not.
func (f *eventFeed) admitUnauthenticated() bool {
	if _, ok := f.unauthenticated.allow(http.StatusUnauthorized); ok {
		return true
	}
	f.suppressed.Inc()
	return false
}

// publishForwarded publishes the partner request that the request whose
// exchange is x was, if it was one forwarded (whatever the partner
// answered: status). Track calls it when the request ends. Accepted
// object writes are published where the engine decides them
// (WriteAccepted).
func (e *Edge) publishForwarded(x *exchange, status int, end time.Time, elapsed time.Duration) {
	if !e.events.hub.Active() || x.problem != "" || x.resource == "" || !x.decision.forwarded {
		return
	}
	ev := events.Event{
		Time:      end,
		Kind:      events.KindWriteAccepted,
		Resource:  string(x.resource),
		Token:     x.token,
		HWMBefore: x.decision.hwmBefore,
		HWM:       x.token, // the admission raised the mark
		Status:    status,
		LatencyMS: float64(elapsed.Microseconds()) / 1000,
		Identity:  x.identity.name(),
	}
	e.events.hub.Publish(&ev)
}

// NoteAdmitted notes, for the event feed, that the request of ctx (a
// partner request) was admitted to be forwarded: its admission raised the
// resource's mark to its token, and Track publishes it as an accepted
// write when it ends, unless its answer was a problem. A request replayed
// from its idempotency record is not noted.
func NoteAdmitted(ctx context.Context) {
	if x := exchangeOf(ctx); x != nil {
		x.decision.forwarded, x.decision.raised = true, true
	}
}

// publishObject publishes an accepted object write or delete, or a
// ticket issued (kind), of resource with token, from the one place that
// decides it for every front door (putFenced, deleteFenced,
// CompleteUpload, Ticket), so that a write
// through the S3 API is published as one through REST is: with the marks
// that the request's exchange noted around its last fence check
// (eventFences), its latency so far (from its arrival, the exchange's
// start), its identity, and the status its front door answers
// (acceptedStatus). created says that a PUT created the object.
func (e *Edge) publishObject(ctx context.Context, kind string, resource api.Resource, token api.Token, etag string, created bool) {
	if !e.events.hub.Active() {
		return
	}
	now := time.Now()
	ev := events.Event{Time: now, Kind: kind, Resource: string(resource), Token: token, ETag: etag}
	if x := exchangeOf(ctx); x != nil {
		ev.HWMBefore, ev.HWM = x.decision.hwmBefore, x.decision.hwmBefore // a check that raised nothing
		if x.decision.raised {
			ev.HWM = token
		}
		if !x.start.IsZero() {
			ev.LatencyMS = float64(now.Sub(x.start).Microseconds()) / 1000
		}
		ev.Identity = x.identity.name()
		ev.Status = acceptedStatus(x.api, kind, created)
	}
	e.events.hub.Publish(&ev)
}

// acceptedStatus is the status that a front door (api: "" for REST)
// answers a write of kind that it accepted: on REST 201 for a PUT that
// created the object, 200 for another, 204 for a DELETE; on the S3 API
// 200 for PutObject, CopyObject and CompleteMultipartUpload, 204 for
// DeleteObject (and for each key DeleteObjects deletes, whose answer is
// one 200 for them all); 201 for a ticket issued.
func acceptedStatus(api, kind string, created bool) int {
	switch {
	case kind == events.KindDeleteAccepted:
		return http.StatusNoContent
	case kind == events.KindTicketIssued:
		return http.StatusCreated
	case created && api == "":
		return http.StatusCreated
	}
	return http.StatusOK
}

// publishRefused publishes the write refused with p for err, about
// resource and token (NoteProblem's audited refusals, and the other
// doors' through NoteRefusal), and, for a stale token, where it
// was caught. Refusals of requests without valid credentials (401) are
// limited (admitUnauthenticated).
func (e *Edge) publishRefused(p api.Problem, err error, x *exchange, resource api.Resource, token api.Token) {
	if !e.events.hub.Active() || resource == "" {
		return
	}
	if p.Status == http.StatusUnauthorized && !e.events.admitUnauthenticated() {
		return
	}
	ev := events.Event{
		Time:     time.Now(),
		Kind:     events.KindWriteRefused,
		Resource: string(resource),
		Token:    token,
		HWM:      p.HighWaterMark,
		Problem:  strings.TrimPrefix(p.Type, api.ProblemTypePrefix), // not x.problem: a door's is its own error code
		Status:   p.Status,
		Identity: x.identity.name(),
	}
	if errors.Is(err, api.ErrStaleToken) {
		ev.Caught = staleCaught(x)
	}
	e.events.hub.Publish(&ev)
}

// eventFences notes, for the event feed, the mark the gateway knew before
// each fence check and whether the check raised it (decisionNote).
type eventFences struct {
	fence.FenceStore
	hub *events.Hub
}

var _ fence.FenceStore = (*eventFences)(nil)

func (f *eventFences) FenceCheck(ctx context.Context, resource api.Resource, token api.Token) error {
	x := f.noteBefore(ctx, resource)
	err := f.FenceStore.FenceCheck(ctx, resource, token)
	noteRaised(x, err)
	return err
}

func (f *eventFences) FenceCheckRenew(ctx context.Context, resource api.Resource, token api.Token) error {
	x := f.noteBefore(ctx, resource)
	err := f.FenceStore.FenceCheckRenew(ctx, resource, token)
	noteRaised(x, err)
	return err
}

func (f *eventFences) CheckNotStale(ctx context.Context, resource api.Resource, token api.Token) error {
	f.noteBefore(ctx, resource) // raises nothing
	return f.FenceStore.CheckNotStale(ctx, resource, token)
}

// noteBefore notes the mark known before a check (noteMarkBefore).
func (f *eventFences) noteBefore(ctx context.Context, resource api.Resource) *exchange {
	return noteMarkBefore(ctx, f.hub, f.FenceStore.CachedHighWaterMark, resource)
}

// NoteMarkBefore notes, for the event feed, resource's mark as cached
// reads it before a check that a door runs itself (a partner admission),
// in the request's exchange, when anyone subscribes.
func (e *Edge) NoteMarkBefore(ctx context.Context, cached func(api.Resource) (api.Token, bool), resource api.Resource) {
	noteMarkBefore(ctx, e.events.hub, cached, resource)
}

// noteMarkBefore notes resource's mark as cached reads it in the
// request's exchange (decisionNote.hwmBefore), when anyone subscribes,
// and returns the exchange, or nil.
func noteMarkBefore(ctx context.Context, hub *events.Hub, cached func(api.Resource) (api.Token, bool), resource api.Resource) *exchange {
	if !hub.Active() {
		return nil
	}
	x := exchangeOf(ctx)
	if x != nil {
		x.decision.hwmBefore, _ = cached(resource)
		x.decision.raised = false // this check's outcome, not an earlier one's
	}
	return x
}

// noteRaised notes in x, if not nil, that a check raised the mark
// (err nil).
func noteRaised(x *exchange, err error) {
	if x != nil && err == nil {
		x.decision.raised = true
	}
}
