package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fencegate/api"
	"fencegate/events"
)

// The event feed: GET /v1/events streams the gateway's decisions (writes
// accepted and refused, locks granted, released and expired, partner requests
// admitted, replayed and busy) as Server-Sent Events, from an events.Hub
// (docs/events.md has the format). The hub keeps the newest decisions
// (Config.EventHistory, EventHistoryBytes): a new subscriber gets them
// first, then the live ones; one that resumes (Last-Event-ID, or since)
// gets those after its position, or a gap event saying how many it lost.
// It never slows the write path: a decision is published with a send
// that never waits (a subscriber whose buffer is full loses the event,
// counted, and is told how many it lost); without history, while nobody
// subscribes, publishing is one atomic load. Most
// decisions are published from the places that already see them whole:
// refusals from noteProblem (audit.go) and, for the S3 API, NoteRefusal
// (s3door.go); accepted object writes and deletes from the fenced write
// path that every front door shares (putFenced, deleteFenced,
// CompleteUpload: accepted, publishObject), forwarded partner requests
// from the track middleware when the request ends (exchange.go), with
// what was noted in the request's exchange on the way (decisionNote: by eventFences around
// the fence store, and by the partner handler); lock events from the
// lock handlers, but expiries, which no request sees, from a watch of
// the lock store while anyone subscribes (lockexpiry.go); partner
// admissions from the partner handler.

const (
	// eventsPath is the feed's route.
	eventsPath = "/v1/events"
	// eventKeepalive is how often a stream sends a comment, so that
	// proxies and clients see it alive.
	eventKeepalive = 15 * time.Second
	// eventFlushInterval is the least time between two writes to a
	// stream: events that arrive meanwhile wait in the subscriber's
	// buffer and go out together, one write and flush for many events
	// under load, so that subscribers cost the gateway little CPU per
	// decision.
	eventFlushInterval = 100 * time.Millisecond
	// eventWriteTimeout bounds each write to a stream: a subscriber that
	// takes nothing for this long is disconnected (its buffer had long
	// been dropping).
	eventWriteTimeout = time.Minute
	// maxWaiterLookups bounds the lock state reads in flight that count a
	// lock event's waiters; an event that finds none free goes out
	// without the count.
	maxWaiterLookups = 8
	// waiterLookupTimeout bounds each of them.
	waiterLookupTimeout = time.Second
)

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

// eventFeed is the gateway's hub and what publishing needs beside it.
type eventFeed struct {
	hub *events.Hub
	// lookups holds a token per lock state read in flight
	// (maxWaiterLookups).
	lookups chan struct{}
	// lockExpiries publishes lock.expired and lock.revoked while anyone
	// subscribes; nil without a source (lockexpiry.go).
	lockExpiries *lockExpiryFeed
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
	return &eventFeed{hub: hub, lookups: make(chan struct{}, maxWaiterLookups),
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

// serveEvents is GET /v1/events[?prefix=P][&since=ID]: see the top of
// the file.
func (g *Gateway) serveEvents(w http.ResponseWriter, r *http.Request) {
	prefix := r.URL.Query().Get("prefix")
	if len(prefix) > maxResourceBytes {
		g.writeError(w, r, fmt.Errorf("%w: prefix longer than %d bytes", api.ErrInvalidRequest, maxResourceBytes))
		return
	}
	after, err := resumePosition(r)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	filter, err := g.eventFilter(r.Context(), prefix)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	if g.draining.Load() {
		g.writeError(w, r, fmt.Errorf("%w: the gateway is shutting down", api.ErrGatewayBusy))
		return
	}
	sub, err := g.events.hub.Subscribe(filter, after)
	switch {
	case errors.Is(err, events.ErrTooManySubscribers):
		g.writeError(w, r, fmt.Errorf("%w: %w: this gateway's limit is %d", api.ErrGatewayBusy, err, g.cfg.EventSubscribers))
		return
	case err != nil:
		g.writeError(w, r, fmt.Errorf("%w: %w: the gateway is shutting down", api.ErrGatewayBusy, err))
		return
	}
	defer sub.Close()
	defer g.events.lockExpiries.join()() // lockexpiry.go
	g.stream(w, r, sub)
}

// resumePosition returns where the subscriber of r resumes: after its
// Last-Event-ID header, which a browser's EventSource sends when it
// reconnects (to the URL it was given, since and all: so the header comes
// first), or after its since parameter; nil (everything held) without
// either. A malformed one is api.ErrInvalidRequest.
func resumePosition(r *http.Request) (*events.Position, error) {
	source, value := "Last-Event-ID", r.Header.Get("Last-Event-ID")
	if value == "" {
		source, value = "since", r.URL.Query().Get("since")
		if !r.URL.Query().Has("since") {
			return nil, nil
		}
	}
	p, err := events.ParsePosition(value)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", api.ErrInvalidRequest, source, err)
	}
	return &p, nil
}

// maxStreamWrite bounds what the stream gathers for one write: the
// backlog, and bursts of live events, go out in writes of this size.
const maxStreamWrite = 64 << 10

// stream writes sub's backlog, then its events, to w until the client
// leaves, the feed closes (the gateway drains), or a write fails.
func (g *Gateway) stream(w http.ResponseWriter, r *http.Request, sub *events.Subscription) {
	ctx := r.Context()
	rc := http.NewResponseController(w)
	// The server's read timeout would end the stream: no more is read
	// from the client, whose leaving cancels ctx.
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	write := func(buf []byte) bool {
		if err := rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout)); err != nil {
			return false
		}
		if _, err := w.Write(buf); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	buf := append(make([]byte, 0, 8<<10), ": subscribed\n\n"...)
	for _, it := range sub.Backlog() {
		if buf = appendItem(buf, it); len(buf) >= maxStreamWrite {
			if !write(buf) {
				return
			}
			buf = buf[:0]
		}
	}
	keepalive := time.NewTicker(eventKeepalive)
	defer keepalive.Stop()
	pause := time.NewTimer(0)
	defer pause.Stop()
	<-pause.C
	for {
		if len(buf) > 0 {
			if !write(buf) {
				return
			}
			buf = buf[:0]
			// Let the next events gather (eventFlushInterval).
			pause.Reset(eventFlushInterval)
			select {
			case <-ctx.Done():
				return
			case <-sub.Done():
				return
			case <-pause.C:
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-sub.Done():
			return
		case <-keepalive.C:
			buf = append(buf, events.Keepalive...)
		case it := <-sub.C():
			buf = appendItem(buf, it)
			for len(buf) < maxStreamWrite && len(sub.C()) > 0 {
				buf = appendItem(buf, <-sub.C())
			}
		}
	}
}

// appendItem appends it's frame, led by a dropped marker when events
// were lost before it.
func appendItem(b []byte, it events.Item) []byte {
	if it.Dropped > 0 {
		b = events.AppendDropped(b, it.Dropped)
	}
	return append(b, it.Frame...)
}

// eventFilter returns what the caller may see of the feed under prefix:
// everything without auth; otherwise the resources under a prefix that
// one of its grants allows to read, and of lock events the grant's
// token and session only where the lock API would show them to it
// (seesGrant). A caller that may read nothing under prefix is refused
// with api.ErrForbidden.
func (g *Gateway) eventFilter(ctx context.Context, prefix string) (events.Filter, error) {
	filter := events.Filter{Prefix: prefix}
	if g.auth == nil {
		return filter, nil
	}
	id := callerIdentity(ctx)
	if id == nil { // only if the route escaped the middleware: fail closed
		return filter, fmt.Errorf("events: %w: request not authenticated", api.ErrUnauthorized)
	}
	var readable []string
	for _, gr := range id.Grants {
		overlaps := strings.HasPrefix(gr.Prefix, prefix) || strings.HasPrefix(prefix, gr.Prefix)
		if overlaps && gr.allows(OpRead) {
			readable = append(readable, gr.Prefix)
		}
	}
	if len(readable) == 0 {
		return filter, fmt.Errorf("%w: identity %q may read no resource under %q", api.ErrForbidden, id.Name, prefix)
	}
	filter.May = func(resource string) bool {
		for _, p := range readable {
			if strings.HasPrefix(resource, p) {
				return true
			}
		}
		return false
	}
	filter.SeesGrant = func(name, owner string) bool { return g.seesGrant(id, name, owner) }
	return filter, nil
}

// publishForwarded publishes the partner request that the request whose
// exchange is x was, if it was one forwarded (whatever the partner
// answered: status). The track middleware calls it when the request
// ends. Accepted object writes are published where they are decided
// (accepted).
func (g *Gateway) publishForwarded(r *http.Request, x *exchange, status int, end time.Time, elapsed time.Duration) {
	if !g.events.hub.Active() || x.problem != "" || x.resource == "" || !x.decision.forwarded ||
		!strings.HasPrefix(r.URL.Path, partnersPrefix) {
		return
	}
	e := events.Event{
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
	g.events.hub.Publish(&e)
}

// accepted publishes the object write res, which the fenced write path
// of every front door (putFenced, CompleteUpload) has just accepted, and
// returns it.
func (g *Gateway) accepted(ctx context.Context, res WriteResult) WriteResult {
	g.publishObject(ctx, events.KindWriteAccepted, res.Resource, res.Token, res.ETag, res.Created)
	return res
}

// publishObject publishes an accepted object write or delete (kind) of
// resource with token, from the one place that decides it for every
// front door (putFenced, deleteFenced, CompleteUpload), so that a write
// through the S3 API is published as one through REST is: with the marks
// that the request's exchange noted around its last fence check
// (eventFences), its latency so far (from its arrival, the exchange's
// start), its identity, and the status its front door answers
// (acceptedStatus). created says that a PUT created the object.
func (g *Gateway) publishObject(ctx context.Context, kind string, resource api.Resource, token api.Token, etag string, created bool) {
	if !g.events.hub.Active() {
		return
	}
	now := time.Now()
	e := events.Event{Time: now, Kind: kind, Resource: string(resource), Token: token, ETag: etag}
	if x := exchangeOf(ctx); x != nil {
		e.HWMBefore, e.HWM = x.decision.hwmBefore, x.decision.hwmBefore // a check that raised nothing
		if x.decision.raised {
			e.HWM = token
		}
		if !x.start.IsZero() {
			e.LatencyMS = float64(now.Sub(x.start).Microseconds()) / 1000
		}
		e.Identity = x.identity.name()
		e.Status = acceptedStatus(x.api, kind, created)
	}
	g.events.hub.Publish(&e)
}

// acceptedStatus is the status that a front door (api: "" for REST)
// answers a write of kind that it accepted: on REST 201 for a PUT that
// created the object, 200 for another, 204 for a DELETE; on the S3 API
// 200 for PutObject, CopyObject and CompleteMultipartUpload, 204 for
// DeleteObject (and for each key DeleteObjects deletes, whose answer is
// one 200 for them all).
func acceptedStatus(api, kind string, created bool) int {
	switch {
	case kind == events.KindDeleteAccepted:
		return http.StatusNoContent
	case created && api == "":
		return http.StatusCreated
	}
	return http.StatusOK
}

// publishRefused publishes the write refused with p for err, about
// resource and token (noteProblem's audited refusals, and the other
// front doors' through NoteRefusal), and, for a stale token, where it
// was caught. Refusals of requests without valid credentials (401) are
// limited (admitUnauthenticated).
func (g *Gateway) publishRefused(p api.Problem, err error, x *exchange, resource api.Resource, token api.Token) {
	if !g.events.hub.Active() || resource == "" {
		return
	}
	if p.Status == http.StatusUnauthorized && !g.events.admitUnauthenticated() {
		return
	}
	e := events.Event{
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
		e.Caught = staleFromEtcd
		if x.staleSource != "" {
			e.Caught = x.staleSource
		}
	}
	g.events.hub.Publish(&e)
}

// publishAdmission publishes a partner request's admission: replayed
// from its idempotency record, or admitted to be forwarded, which it
// notes for publishForwarded.
func (g *Gateway) publishAdmission(r *http.Request, pr partnerRequest, adm api.Admission) {
	x := exchangeOf(r.Context())
	if x != nil && adm.Replay == nil {
		x.decision.forwarded, x.decision.raised = true, true
	}
	if !g.events.hub.Active() {
		return
	}
	e := events.Event{Time: time.Now(), Kind: events.KindPartnerAdmitted, Resource: string(pr.resource), Token: pr.token, Identity: callerName(r.Context())}
	if adm.Replay != nil {
		e.Kind, e.Status = events.KindPartnerReplayed, adm.Replay.Status
	}
	g.events.hub.Publish(&e)
}

// publishPartnerBusy publishes a partner request refused for err, when
// err says that its resource was busy.
func (g *Gateway) publishPartnerBusy(r *http.Request, pr partnerRequest, err error) {
	if !g.events.hub.Active() || !errors.Is(err, api.ErrResourceBusy) {
		return
	}
	g.events.hub.Publish(&events.Event{
		Time:     time.Now(),
		Kind:     events.KindPartnerBusy,
		Resource: string(pr.resource),
		Token:    pr.token,
		Status:   api.ProblemFor(err).Status,
		Identity: callerName(r.Context()),
	})
}

// publishLock publishes a lock event of kind about lock name's grant
// with token (and session, zero: unknown), which the caller acquired or
// released: its session is the caller's own, or, for an operator, maybe
// another identity's, whose token and session only operators then see
// (Event.SessionOwner). The lock's waiters are counted
// by a read of its state after the decision, off the request
// (maxWaiterLookups at once; without a free one the event goes out
// without the count); the event keeps the decision's time. While nobody
// subscribes the event only goes to the history, without the count: a
// grant then costs no etcd read for a feed that nobody reads.
func (h *lockAPI) publishLock(r *http.Request, kind, name string, token api.Token, session api.SessionID) {
	feed := h.g.events
	if !feed.hub.Active() {
		return
	}
	caller := callerName(r.Context())
	e := &events.Event{Time: time.Now(), Kind: kind, Resource: name, Token: token, Identity: caller, Holder: caller, SessionOwner: caller}
	if session != 0 {
		e.Session = session.String()
	}
	if feed.hub.Subscribers() == 0 {
		feed.hub.Publish(e)
		return
	}
	select {
	case feed.lookups <- struct{}{}:
	default:
		feed.hub.Publish(e)
		return
	}
	ctx := context.WithoutCancel(r.Context())
	go func() {
		defer func() { <-feed.lookups }()
		ctx, cancel := context.WithTimeout(ctx, waiterLookupTimeout)
		defer cancel()
		if st, err := h.locks.LockState(ctx, name, 0, nil); err == nil {
			waiters := st.QueueLength
			if st.Held {
				waiters--
			}
			e.Waiters = &waiters
		}
		feed.hub.Publish(e)
	}()
}

// eventFences notes, for the event feed, the mark the gateway knew before
// each fence check and whether the check raised it (decisionNote).
type eventFences struct {
	FenceStore
	hub *events.Hub
}

var _ FenceStore = (*eventFences)(nil)

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
