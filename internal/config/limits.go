package config

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"fencegate/gateway"
	"fencegate/internal/fielderr"
	"fencegate/retention"
	"fencegate/tokenstore"
)

// limitFlags are the values of the limits' flags: the gateway's body,
// header and transfer-rate limits, those of the lock API, and whether
// deletes of absent objects leave marks in etcd. For the counts, 0 means
// no limit.
type limitFlags struct {
	buffer, bufferBudget, maxBody, maxHeader byteSize
	transferChunk                            time.Duration
	perClient                                int
	maxSessions, maxLocks, maxLockWaiters    int
	tombstonesForAbsent                      bool
	// Multipart uploads of large REST PUT bodies (gateway.Config).
	multipartThreshold, multipartPartSize byteSize
	uploadTTL                             time.Duration
	// How long a ticket (POST /v1/tickets) may be used (gateway.Config).
	ticketExpiry time.Duration
	// The event feed's bounds (gateway.Config).
	eventSubscribers, eventBuffer int
	eventHistory                  int // 0: none, the feed is live only
	eventHistoryBytes             byteSize
	// The mark evictor's (package retention).
	markRetention, tombstoneRetention, evictionInterval time.Duration
}

// addLimitFlags adds the limits' flags, with the gateway's and the token
// store's defaults, to fs.
func addLimitFlags(fs *flag.FlagSet) *limitFlags {
	d := gateway.DefaultConfig()
	l := &limitFlags{buffer: byteSize(d.BufferBytes), bufferBudget: byteSize(d.BufferBudgetBytes), maxBody: byteSize(d.MaxBodyBytes), maxHeader: byteSize(d.MaxHeaderBytes)}
	fs.Var(&l.buffer, "buffer-bytes", "largest body held in memory (`bytes`, such as 8MiB), so that a write that lost a race\ncan be retried; larger bodies stream, and a lost race on them is a retryable 409")
	fs.Var(&l.bufferBudget, "buffer-budget-bytes", "most memory that the bodies held in memory (see --buffer-bytes) take, all requests'\ntogether (`bytes`); a body that finds it in use is refused with a retryable 503 gateway-busy")
	fs.Var(&l.maxBody, "max-body-bytes", "largest request body accepted (`bytes`; 413 beyond)")
	fs.Var(&l.maxHeader, "max-header-bytes", "largest request header block accepted (`bytes`; 431 beyond)")
	fs.DurationVar(&l.transferChunk, "transfer-chunk-timeout", d.TransferChunkTimeout, "minimum rate of object bodies to and from clients: each 64 KiB must move within this\n`duration`, else the client is cut off and its S3 request ended")
	fs.IntVar(&l.perClient, "max-requests-per-client", d.MaxRequestsPerClient, "most object requests one client (its identity; its address with auth off) may have\nin flight (429 beyond; 0: no limit)")
	fs.IntVar(&l.maxSessions, "max-sessions-per-identity", tokenstore.DefaultMaxSessionsPerIdentity, "most live sessions of one identity, across every gateway on the etcd cluster\n(`n`; 429 too-many-sessions beyond; 0: no limit)")
	fs.IntVar(&l.maxLocks, "max-locks-per-session", tokenstore.DefaultMaxLocksPerSession, "most locks one session holds plus queues it waits in\n(`n`; 429 too-many-locks beyond; 0: no limit)")
	fs.IntVar(&l.maxLockWaiters, "max-lock-waiters", d.MaxLockWaiters, "most lock requests with a wait above 0 that this gateway serves at once\n(`n`; 503 too-many-waiters beyond; 0: no limit)")
	fs.BoolVar(&l.tombstonesForAbsent, "tombstones-for-absent", false, "a DELETE of an object that is not there raises its high-water mark, a tombstone kept\nin etcd for ever (default: it only checks the token, and leaves no mark)")
	fs.DurationVar(&l.markRetention, "mark-retention", retention.DefaultRetention, "a high-water mark that its object records (the object's fence-token equals it) is\nremoved from etcd this `duration` after its last raise (negative: marks are kept for ever)")
	fs.DurationVar(&l.tombstoneRetention, "tombstone-retention", 0, "a mark whose object is absent (a tombstone of a delete) is removed from etcd this\n`duration` after its last raise (0: kept for ever); a writer with a token below the\ndeleter's can then create the object again")
	l.multipartThreshold, l.multipartPartSize = byteSize(d.MultipartThreshold), byteSize(d.MultipartPartSize)
	fs.Var(&l.multipartThreshold, "multipart-threshold", "a REST PUT body larger than this (`bytes`) is uploaded to S3 in parts, fenced at\nits completion, up to 10,000 parts (0: every body in one PUT, up to --max-body-bytes)")
	fs.Var(&l.multipartPartSize, "multipart-part-size", "size of those parts (`bytes`, 5MiB to 5GiB)")
	fs.DurationVar(&l.uploadTTL, "upload-ttl", d.UploadTTL, "a multipart upload neither completed nor aborted is forgotten in etcd after this `duration`")
	fs.DurationVar(&l.ticketExpiry, "ticket-expiry", d.TicketExpiry, "a ticket (POST /v1/tickets) may be used for this `duration`, whole seconds from 1s to\n168h; S3's ABA window for a ticket's write lasts as long: keep it short")
	fs.IntVar(&l.eventSubscribers, "events-max-subscribers", d.EventSubscribers, "most subscribers of the event feed (GET /v1/events) at once on this gateway\n(`n`, 1 to 4096; 503 gateway-busy beyond)")
	fs.IntVar(&l.eventBuffer, "events-buffer", d.EventBuffer, "events each subscriber's buffer holds (`n`, 1 to 65536); a subscriber further behind\nloses events, counted, and is told how many")
	fs.IntVar(&l.eventHistory, "events-history", d.EventHistory, "decisions this gateway keeps for the event feed's new subscribers and for those\nthat resume after a dropped connection (`n`, 0 to 1000000; 0: none, the feed is live only)")
	l.eventHistoryBytes = byteSize(d.EventHistoryBytes)
	fs.Var(&l.eventHistoryBytes, "events-history-bytes", "most memory those decisions take (`bytes`, 64KiB to 1GiB); the oldest go first")
	fs.DurationVar(&l.evictionInterval, "mark-eviction-interval", retention.DefaultInterval, "pause between two passes of the mark evictor over etcd's marks (`duration`)")
	return l
}

// marks returns the mark evictor's config.
func (l *limitFlags) marks() retention.Config {
	return retention.Config{Retention: l.markRetention, TombstoneRetention: l.tombstoneRetention, Interval: l.evictionInterval}
}

// gateway returns the gateway's limits. A count's 0 (no limit) becomes
// the gateway's negative where its zero means the default.
func (l *limitFlags) gateway() gateway.Config {
	return gateway.Config{
		BufferBytes:          int64(l.buffer),
		BufferBudgetBytes:    int64(l.bufferBudget),
		MaxBodyBytes:         int64(l.maxBody),
		MaxHeaderBytes:       int(l.maxHeader),
		TransferChunkTimeout: l.transferChunk,
		MaxRequestsPerClient: l.perClient,
		MaxLockWaiters:       noLimitIfZero(l.maxLockWaiters),
		TombstonesForAbsent:  l.tombstonesForAbsent,
		MultipartThreshold:   offIfZero(int64(l.multipartThreshold)),
		MultipartPartSize:    int64(l.multipartPartSize),
		UploadTTL:            l.uploadTTL,
		TicketExpiry:         l.ticketExpiry,
		EventSubscribers:     l.eventSubscribers,
		EventBuffer:          l.eventBuffer,
		EventHistory:         noneIfZero(l.eventHistory),
		EventHistoryBytes:    int64(l.eventHistoryBytes),
	}
}

// store sets the lock API's limits of c.
func (l *limitFlags) store(c *tokenstore.Config) {
	c.MaxSessionsPerIdentity = noLimitIfZero(l.maxSessions)
	c.MaxLocksPerSession = noLimitIfZero(l.maxLocks)
}

// offIfZero maps a size flag's 0 (off) to the gateway's negative.
func offIfZero(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

// noneIfZero maps a count's 0 (none) to the gateway's negative, where
// its zero means the default.
func noneIfZero(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// noLimitIfZero maps a flag's 0 (no limit) to the packages' negative.
func noLimitIfZero(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// The bounds of --events-max-subscribers and --events-buffer (and the
// events section's fields). Each subscriber holds a connection, a
// goroutine and a buffer of this many events, allocated when it
// subscribes; an event waiting in buffers is about 300 bytes, shared by
// them: 65536 such events are about 20 MiB.
const (
	maxEventSubscribers = 4096
	maxEventBuffer      = 1 << 16
)

// The bounds of --events-history and --events-history-bytes (and the
// events section's history and history_bytes): the ring of recent
// decisions holds a pointer per event it may hold, allocated when the
// gateway starts (8 MB at most), and the decisions themselves, about 450
// bytes each, up to the bytes bound.
const (
	maxEventHistory      = 1_000_000
	minEventHistoryBytes = 64 << 10
	maxEventHistoryBytes = 1 << 30
)

// The bounds of --max-header-bytes (and limits.max_header_bytes): the
// http.Server's own limit is this plus headerSlack, and the headers are
// read whole.
const (
	minHeaderBytes = 1 << 10
	maxHeaderBytes = 16 << 20
)

// validate checks the gateway's size limits and the lock API's: the flags'
// own bounds (shared with the file's fields), then the gateway's rules
// that relate them (gateway.Config.Validate).
func (l *limitFlags) validate() error {
	var errs []error
	for _, f := range []struct {
		flag        string
		b           byteSize
		least, most int64
	}{
		{"buffer-bytes", l.buffer, 1, maxSize}, {"buffer-budget-bytes", l.bufferBudget, 1, maxSize},
		{"max-body-bytes", l.maxBody, 1, maxSize}, {"max-header-bytes", l.maxHeader, minHeaderBytes, maxHeaderBytes},
		// 0 is "every body in one PUT"; S3's bounds on a part are the
		// gateway's rule (below): zero here is refused, not the default.
		{"multipart-threshold", l.multipartThreshold, 0, maxSize}, {"multipart-part-size", l.multipartPartSize, 1, maxSize},
		{"events-history-bytes", l.eventHistoryBytes, minEventHistoryBytes, maxEventHistoryBytes},
	} {
		if err := validateSize(f.b, f.least, f.most); err != nil {
			errs = append(errs, fmt.Errorf("--%s %w", f.flag, err))
		}
	}
	for _, c := range []struct {
		flag string
		n    int
	}{{"max-requests-per-client", l.perClient}, {"max-sessions-per-identity", l.maxSessions}, {"max-locks-per-session", l.maxLocks}, {"max-lock-waiters", l.maxLockWaiters}} {
		if c.n < 0 {
			errs = append(errs, fmt.Errorf("--%s %d: must not be negative (0: no limit)", c.flag, c.n))
		}
	}
	for _, c := range []struct {
		flag    string
		n, most int
		least   int
	}{{"events-max-subscribers", l.eventSubscribers, maxEventSubscribers, 1}, {"events-buffer", l.eventBuffer, maxEventBuffer, 1},
		{"events-history", l.eventHistory, maxEventHistory, 0}} {
		if c.n < c.least || c.n > c.most {
			errs = append(errs, fmt.Errorf("--%s %d: must be from %d to %d", c.flag, c.n, c.least, c.most))
		}
	}
	errs = append(errs, positive("transfer-chunk-timeout", l.transferChunk), positive("mark-eviction-interval", l.evictionInterval),
		positive("upload-ttl", l.uploadTTL), positive("ticket-expiry", l.ticketExpiry))
	if l.tombstoneRetention < 0 {
		errs = append(errs, fmt.Errorf("--tombstone-retention %v: must not be negative (0: kept for ever)", l.tombstoneRetention))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	flagName := func(field string) string { return "--" + strings.ReplaceAll(field, "_", "-") }
	for _, fe := range fielderr.List(l.gateway().Validate(flagName)) {
		errs = append(errs, fmt.Errorf("%s %w", flagName(fe.Field), fe.Err))
	}
	return errors.Join(errs...)
}
