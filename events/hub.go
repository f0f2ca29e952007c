// Package events owns the gateway's decision feed: the Event record of one
// decision (a write accepted or refused, a lock granted, released or
// expired, a partner request admitted, replayed or busy), its wire form
// as a Server-Sent Event, and the Hub that keeps the recent ones and fans
// events out to subscribers.
//
// The Hub keeps its newest events in a ring bounded by count and bytes
// (Config.History, Config.HistoryBytes) and gives them to a new
// subscriber before the live ones, or, to one that resumes from a
// Position (the id of the last event it read), those after it. Both are
// taken under the lock that publishing holds, so that the subscriber gets
// each event once, none missing at the seam. When the ring no longer
// holds all that was asked for, a gap event says how many were lost, so
// that a subscriber never takes a gap for quiet. A Hub numbers its events
// from 1 and names its run with a random id that every event id carries:
// a position from another run (the gateway restarted, or the subscriber
// reached another gateway) is recognized as such, and answered with a
// gap event rather than a replay of events it does not designate.
//
// The Hub is built so that publishing never waits for a subscriber: each
// subscriber has a bounded buffer, a publisher puts an event in it with a
// send that never blocks, and an event that finds the buffer full is
// dropped and counted, for that subscriber and in the Hub's total. The
// subscriber learns how many it lost from the next event it is given
// (Item.Dropped). The cost of publishing is one encoding of the event,
// shared by the ring and every subscriber, plus a filter and a channel
// send per subscriber; with no history kept and nobody subscribed, one
// check of an atomic (Active).
//
// What a subscriber may see (authorization) is the caller's to say: a
// subscription takes a resource prefix, a predicate on resource names,
// and one on lock grants: a lock event goes to a subscriber that may not
// see its grant without the grant's token and session (an encoding of
// its own, shared by all such subscribers), since a token is all that a
// write behind a "held" token check needs. Events from the ring are
// filtered and authorized per event by the same filter as live ones.
package events

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// Defaults of Config's zero fields.
const (
	// DefaultMaxSubscribers is Config.MaxSubscribers' default.
	DefaultMaxSubscribers = 64
	// DefaultBuffer is Config.Buffer's default: at about 300 bytes an
	// event, 300 KiB a subscriber at most.
	DefaultBuffer = 1024
	// DefaultHistory is Config.History's default.
	DefaultHistory = 10000
	// DefaultHistoryBytes is Config.HistoryBytes' default: at about 450
	// bytes an event in the ring, the count bound comes first.
	DefaultHistoryBytes = 8 << 20
)

// ErrTooManySubscribers is Subscribe's error when the Hub has
// Config.MaxSubscribers subscribers already.
var ErrTooManySubscribers = errors.New("too many event subscribers")

// ErrClosed is Subscribe's error after Close.
var ErrClosed = errors.New("event feed closed")

// Config bounds a Hub. Zero fields take the defaults.
type Config struct {
	// MaxSubscribers bounds the subscriptions at once; Subscribe refuses
	// more with ErrTooManySubscribers. Zero means DefaultMaxSubscribers.
	MaxSubscribers int
	// Buffer is how many events each subscriber's buffer holds; an event
	// that finds it full is dropped. Zero means DefaultBuffer.
	Buffer int
	// History is how many of the newest events the Hub keeps for new
	// and resuming subscribers. Zero means DefaultHistory; negative keeps
	// none (the feed is live only).
	History int
	// HistoryBytes bounds the memory those events take (their frames,
	// their resource names and a fixed overhead each). Zero means
	// DefaultHistoryBytes.
	HistoryBytes int64
}

// Hub fans events out to subscribers. Its zero value is not usable:
// create it with NewHub. All methods are safe for concurrent use.
type Hub struct {
	cfg Config
	run string // names this Hub's run in its events' ids

	// subs is the current subscribers, replaced (never changed in place)
	// under mu, so that Active reads it without a lock.
	subs atomic.Pointer[[]*Subscription]
	// mu orders publishers: each event gets its sequence number and is
	// put in every buffer under it, so that every subscriber sees events
	// in sequence order. It also guards subscribing and closing.
	mu     sync.Mutex
	seq    uint64
	closed bool
	// history holds the newest events (under mu); nil when Config.History
	// is negative. held and heldBytes are its size, for the metrics.
	history   *ring
	held      atomic.Int64
	heldBytes atomic.Int64
	done      chan struct{} // closed by Close
	dropped   atomic.Uint64 // over all subscribers, ever
}

// NewHub returns a Hub bounded by cfg.
func NewHub(cfg Config) *Hub {
	if cfg.MaxSubscribers <= 0 {
		cfg.MaxSubscribers = DefaultMaxSubscribers
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	if cfg.History == 0 {
		cfg.History = DefaultHistory
	}
	if cfg.HistoryBytes <= 0 {
		cfg.HistoryBytes = DefaultHistoryBytes
	}
	h := &Hub{cfg: cfg, run: newRun(), done: make(chan struct{})}
	if cfg.History > 0 {
		h.history = newRing(cfg.History, cfg.HistoryBytes)
	}
	h.subs.Store(new([]*Subscription))
	return h
}

// Run returns the name of this Hub's run, which its events' ids carry
// (Position.Run).
func (h *Hub) Run() string { return h.run }

// History returns how many events the Hub holds for new subscribers, and
// the bytes they are counted for against Config.HistoryBytes.
func (h *Hub) History() (events int, bytes int64) {
	return int(h.held.Load()), h.heldBytes.Load()
}

// Filter says which events a subscription gets.
type Filter struct {
	// Prefix keeps the events whose resource starts with it; "" keeps
	// all.
	Prefix string
	// May reports whether the subscriber may see events of a resource.
	// Nil means every resource.
	May func(resource string) bool
	// SeesGrant reports whether the subscriber may see the token and
	// session of a grant of lock name whose session belongs to owner
	// (Event.SessionOwner). A lock event that it refuses is delivered
	// without them. Nil means every grant's.
	SeesGrant func(name, owner string) bool
}

func (f Filter) keeps(resource string) bool {
	return strings.HasPrefix(resource, f.Prefix) && (f.May == nil || f.May(resource))
}

func (f Filter) seesGrant(e *Event) bool {
	return f.SeesGrant == nil || f.SeesGrant(e.Resource, e.SessionOwner)
}

// Item is one delivered event: its SSE frame, and how many events of the
// subscription were dropped just before it.
type Item struct {
	// Frame is the event as a whole SSE message (appendFrame), or, in a
	// backlog, a gap event (appendGap).
	// Shared by every subscriber: never change it.
	Frame []byte
	// Dropped counts the events this subscriber lost (its buffer was
	// full) between the item before this one and this one.
	Dropped uint64
}

// Subscription is one subscriber's buffer. Read its items from C until
// Done is closed, and Close it when done.
type Subscription struct {
	hub    *Hub
	filter Filter
	c      chan Item
	// dropped counts events lost since the last item put in c; it is
	// changed only under hub.mu.
	dropped uint64
	once    sync.Once
	backlog []Item
}

// Subscribe adds a subscription with filter, or fails with
// ErrTooManySubscribers or ErrClosed. Its Backlog is the events the Hub
// holds that filter keeps: all of them when after is nil, otherwise
// those after it. When some of those asked for are no longer held, or
// after is not of this Hub's run, the backlog starts with a gap event
// (appendGap): lost counts the events of this run after the position
// that are no longer held (events of every resource: of them, the
// subscriber would have had those its filter keeps), and other_run says
// that events of another run after it are lost too, in a number this Hub
// cannot know. A position of this run ahead of its newest event is one
// no run of this Hub issued: it is taken for another run's. C then
// delivers every event published after the backlog's, from the same
// instant: none twice, none missing.
func (h *Hub) Subscribe(filter Filter, after *Position) (*Subscription, error) {
	s, recs, gap, err := h.subscribe(filter, after)
	if err != nil {
		return nil, err
	}
	// Filtered outside the lock: records never change once held.
	if gap != nil {
		s.backlog = append(s.backlog, Item{Frame: gap})
	}
	for _, r := range recs {
		if !filter.keeps(r.resource) {
			continue
		}
		f := r.frame
		if r.hidden != nil && !(filter.SeesGrant == nil || filter.SeesGrant(r.resource, r.owner)) {
			f = r.hidden
		}
		s.backlog = append(s.backlog, Item{Frame: f})
	}
	return s, nil
}

// subscribe adds s under the lock, with the held records after after and
// the gap event that comes before them, if any.
func (h *Hub) subscribe(filter Filter, after *Position) (s *Subscription, recs []*record, gap []byte, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, nil, ErrClosed
	}
	old := *h.subs.Load()
	if len(old) >= h.cfg.MaxSubscribers {
		return nil, nil, nil, fmt.Errorf("%w: this gateway's limit is %d", ErrTooManySubscribers, h.cfg.MaxSubscribers)
	}
	s = &Subscription{hub: h, filter: filter, c: make(chan Item, h.cfg.Buffer)}
	subs := append(append(make([]*Subscription, 0, len(old)+1), old...), s)
	h.subs.Store(&subs)

	oldest := h.history.oldest(h.seq + 1)
	since := uint64(0)
	if after != nil {
		since = after.Seq
		otherRun := (after.Run != "" && after.Run != h.run) || after.Seq > h.seq
		if otherRun {
			since = 0
		}
		if otherRun || since+1 < oldest {
			gap = appendGap(make([]byte, 0, 96), Position{Run: h.run, Seq: oldest - 1}, oldest-1-since, otherRun)
		}
	}
	if h.history != nil {
		recs = h.history.after(since)
	}
	return s, recs, gap, nil
}

// Backlog returns what the subscription gets before C's items: a gap
// event if some events asked for are lost, then the held events that its
// filter keeps, oldest first (Subscribe). Shared frames: never change
// them. It returns them once, and nil after: the subscription does not
// keep events alive that the ring has let go.
func (s *Subscription) Backlog() []Item {
	b := s.backlog
	s.backlog = nil
	return b
}

// C delivers the subscription's items, in sequence order.
func (s *Subscription) C() <-chan Item { return s.c }

// Done is closed when the Hub is closed: the subscriber should end.
func (s *Subscription) Done() <-chan struct{} { return s.hub.done }

// Close ends the subscription; it is safe to call more than once.
func (s *Subscription) Close() {
	s.once.Do(func() {
		h := s.hub
		h.mu.Lock()
		defer h.mu.Unlock()
		old := *h.subs.Load()
		subs := make([]*Subscription, 0, len(old))
		for _, o := range old {
			if o != s {
				subs = append(subs, o)
			}
		}
		h.subs.Store(&subs)
	})
}

// Active reports whether an event published now goes anywhere: the Hub
// keeps history, or someone subscribes. Publishers check it before they
// build an event, so that a feed without history costs nothing while
// nobody listens.
func (h *Hub) Active() bool { return h.history != nil || len(*h.subs.Load()) > 0 }

// Subscribers returns how many subscriptions there are.
func (h *Hub) Subscribers() int { return len(*h.subs.Load()) }

// Dropped returns how many events were dropped, over all subscribers,
// since the Hub was made.
func (h *Hub) Dropped() uint64 { return h.dropped.Load() }

// Publish gives e, with its next sequence number, to the ring and to
// every subscription whose filter keeps it, without ever waiting: a
// subscription whose buffer is full loses it, counted. e.Seq is set; the
// rest of e is the caller's. The event is encoded once, and only when it
// is kept (by the ring, or some filter); a lock event once more without
// its grant's token and session, for the subscribers whose filter may
// not see them (Filter.SeesGrant).
func (h *Hub) Publish(e *Event) {
	kept := h.history != nil
	for _, s := range *h.subs.Load() {
		if kept {
			break
		}
		kept = s.filter.keeps(e.Resource)
	}
	if !kept {
		return
	}
	// Encoded outside the lock: all but the sequence number.
	body := e.appendFields(make([]byte, 0, 320))
	var hiddenBody []byte
	if e.isLock() {
		hiddenBody = e.withoutGrant().appendFields(make([]byte, 0, 320))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	e.Seq = h.seq
	var frame, hidden []byte
	if h.history != nil {
		frame = h.appendFrame(make([]byte, 0, len(body)+96), e.Seq, body)
		r := &record{seq: e.Seq, resource: e.Resource, owner: e.SessionOwner, frame: frame}
		if hiddenBody != nil {
			hidden = h.appendFrame(make([]byte, 0, len(hiddenBody)+96), e.Seq, hiddenBody)
			r.hidden = hidden
		}
		h.history.push(r)
		h.held.Store(int64(h.history.n))
		h.heldBytes.Store(h.history.bytes)
	}
	for _, s := range *h.subs.Load() { // those of now, under the lock
		if !s.filter.keeps(e.Resource) {
			continue
		}
		var f []byte
		switch {
		case hiddenBody != nil && !s.filter.seesGrant(e):
			if hidden == nil {
				hidden = h.appendFrame(make([]byte, 0, len(hiddenBody)+96), e.Seq, hiddenBody)
			}
			f = hidden
		default:
			if frame == nil {
				frame = h.appendFrame(make([]byte, 0, len(body)+96), e.Seq, body)
			}
			f = frame
		}
		select {
		case s.c <- Item{Frame: f, Dropped: s.dropped}:
			s.dropped = 0
		default:
			s.dropped++
			h.dropped.Add(1)
		}
	}
}

// appendFrame appends the frame of the event numbered seq of this run
// whose fields are body (appendFrame).
func (h *Hub) appendFrame(b []byte, seq uint64, body []byte) []byte {
	return appendFrame(b, h.run, seq, body)
}

// Close ends every subscription (their Done is closed) and refuses new
// ones. Publishing after Close delivers nothing new to anyone reading.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
}
