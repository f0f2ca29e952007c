// Package events owns the gateway's decision feed: the Event record of one
// decision (a write accepted or refused, a lock granted, released or
// expired, a partner request admitted, replayed or busy), its wire form
// as a Server-Sent Event, and the Hub that fans events out to
// subscribers.
//
// The Hub is built so that publishing never waits for a subscriber: each
// subscriber has a bounded buffer, a publisher puts an event in it with a
// send that never blocks, and an event that finds the buffer full is
// dropped and counted, for that subscriber and in the Hub's total. The
// subscriber learns how many it lost from the next event it is given
// (Item.Dropped). The cost of publishing is one check of an atomic when
// nobody subscribes, and otherwise one encoding of the event, shared by
// every subscriber, plus a filter and a channel send per subscriber.
//
// What a subscriber may see (authorization) is the caller's to say: a
// subscription takes a resource prefix, a predicate on resource names,
// and one on lock grants: a lock event goes to a subscriber that may not
// see its grant without the grant's token and session (an encoding of
// its own, shared by all such subscribers), since a token is all that a
// write behind a "held" token check needs.
package events

import (
	"errors"
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
}

// Hub fans events out to subscribers. Its zero value is not usable:
// create it with NewHub. All methods are safe for concurrent use.
type Hub struct {
	cfg Config

	// subs is the current subscribers, replaced (never changed in place)
	// under mu, so that Active reads it without a lock.
	subs atomic.Pointer[[]*Subscription]
	// mu orders publishers: each event gets its sequence number and is
	// put in every buffer under it, so that every subscriber sees events
	// in sequence order. It also guards subscribing and closing.
	mu      sync.Mutex
	seq     uint64
	closed  bool
	done    chan struct{} // closed by Close
	dropped atomic.Uint64 // over all subscribers, ever
}

// NewHub returns a Hub bounded by cfg.
func NewHub(cfg Config) *Hub {
	if cfg.MaxSubscribers <= 0 {
		cfg.MaxSubscribers = DefaultMaxSubscribers
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	h := &Hub{cfg: cfg, done: make(chan struct{})}
	h.subs.Store(new([]*Subscription))
	return h
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
	// Frame is the event as a whole SSE message (Event.AppendFrame).
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
}

// Subscribe adds a subscription with filter, or fails with
// ErrTooManySubscribers or ErrClosed.
func (h *Hub) Subscribe(filter Filter) (*Subscription, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	old := *h.subs.Load()
	if len(old) >= h.cfg.MaxSubscribers {
		return nil, ErrTooManySubscribers
	}
	s := &Subscription{hub: h, filter: filter, c: make(chan Item, h.cfg.Buffer)}
	subs := append(append(make([]*Subscription, 0, len(old)+1), old...), s)
	h.subs.Store(&subs)
	return s, nil
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

// Active reports whether anyone subscribes. Publishers check it before
// they build an event, so that the feed costs nothing while nobody
// listens.
func (h *Hub) Active() bool { return len(*h.subs.Load()) > 0 }

// Subscribers returns how many subscriptions there are.
func (h *Hub) Subscribers() int { return len(*h.subs.Load()) }

// Dropped returns how many events were dropped, over all subscribers,
// since the Hub was made.
func (h *Hub) Dropped() uint64 { return h.dropped.Load() }

// Publish gives e, with its next sequence number, to every subscription
// whose filter keeps it, without ever waiting: a subscription whose buffer
// is full loses it, counted. e.Seq is set; the rest of e is the caller's.
// The event is encoded once, and only when some filter keeps it; a lock
// event once more without its grant's token and session, for the
// subscribers whose filter may not see them (Filter.SeesGrant).
func (h *Hub) Publish(e *Event) {
	subs := *h.subs.Load()
	kept := false
	for _, s := range subs {
		if kept = s.filter.keeps(e.Resource); kept {
			break
		}
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
	for _, s := range *h.subs.Load() { // those of now, under the lock
		if !s.filter.keeps(e.Resource) {
			continue
		}
		var f []byte
		switch {
		case hiddenBody != nil && !s.filter.seesGrant(e):
			if hidden == nil {
				hidden = appendFrame(make([]byte, 0, len(hiddenBody)+64), e.Seq, hiddenBody)
			}
			f = hidden
		default:
			if frame == nil {
				frame = appendFrame(make([]byte, 0, len(body)+64), e.Seq, body)
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
