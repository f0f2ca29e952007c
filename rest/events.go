package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/events"
)

// The event feed: GET /v1/events streams the gateway's decisions (writes
// accepted and refused, locks granted, released and expired, partner requests
// admitted, replayed and busy) as Server-Sent Events, from an events.Hub
// (docs/events.md has the format). The hub keeps the newest decisions
// (Config.EventHistory, EventHistoryBytes): a new subscriber gets them
// first, then the live ones; one that resumes (Last-Event-ID, or since)
// gets those after its position, or a gap event saying how many it lost.
// The edge publishes the decisions every door shares (package edge:
// refusals, accepted object writes and deletes, forwarded partner
// requests); the REST API publishes its own here: lock events from the
// lock handlers (publishLock), but expiries, which no request sees, from
// a watch of the lock store while anyone subscribes (lockexpiry.go);
// partner admissions and busy refusals from the partner handler.

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

// serveEvents is GET /v1/events[?prefix=P][&since=ID]: see the top of
// the file.
func (g *API) serveEvents(w http.ResponseWriter, r *http.Request) {
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
	sub, err := g.edge.Events().Subscribe(filter, after)
	switch {
	case errors.Is(err, events.ErrTooManySubscribers):
		g.writeError(w, r, fmt.Errorf("%w: %w", api.ErrGatewayBusy, err))
		return
	case err != nil:
		g.writeError(w, r, fmt.Errorf("%w: %w: the gateway is shutting down", api.ErrGatewayBusy, err))
		return
	}
	defer sub.Close()
	defer g.lockExpiries.join()() // lockexpiry.go
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
func (g *API) stream(w http.ResponseWriter, r *http.Request, sub *events.Subscription) {
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
func (g *API) eventFilter(ctx context.Context, prefix string) (events.Filter, error) {
	filter := events.Filter{Prefix: prefix}
	if !g.edge.AuthEnabled() {
		return filter, nil
	}
	id := edge.Caller(ctx)
	if id == nil { // only if the route escaped the middleware: fail closed
		return filter, fmt.Errorf("events: %w: request not authenticated", api.ErrUnauthorized)
	}
	var readable []string
	for _, gr := range id.Grants {
		overlaps := strings.HasPrefix(gr.Prefix, prefix) || strings.HasPrefix(prefix, gr.Prefix)
		if overlaps && gr.Allows(edge.OpRead) {
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
	hub, lookups := h.g.edge.Events(), h.g.lookups
	if !hub.Active() {
		return
	}
	caller := edge.CallerName(r.Context())
	e := &events.Event{Time: time.Now(), Kind: kind, Resource: name, Token: token, Identity: caller, Holder: caller, SessionOwner: caller}
	if session != 0 {
		e.Session = session.String()
	}
	if hub.Subscribers() == 0 {
		hub.Publish(e)
		return
	}
	select {
	case lookups <- struct{}{}:
	default:
		hub.Publish(e)
		return
	}
	ctx := context.WithoutCancel(r.Context())
	go func() {
		defer func() { <-lookups }()
		ctx, cancel := context.WithTimeout(ctx, waiterLookupTimeout)
		defer cancel()
		if st, err := h.locks.LockState(ctx, name, 0, nil); err == nil {
			waiters := st.QueueLength
			if st.Held {
				waiters--
			}
			e.Waiters = &waiters
		}
		hub.Publish(e)
	}()
}
