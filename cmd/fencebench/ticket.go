package main

// The ticket cells: writes on upload tickets (POST /v1/tickets, then the
// bytes straight to S3 on the presigned conditional PUT the gateway
// answered; docs/tickets.md) beside the same SDK client writing straight
// to S3 (modeDirectSDK), in the same rounds: the raise shape at 64
// writers with 1 KiB bodies, and a shape of 64 MiB objects, the bodies
// tickets are for. The load counts the bytes it sends the gateway, so
// that a ticket mode that wrote through it would show.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"fencegate/api"
)

// modeTicket is a write on a ticket: the load asks the gateway (its own
// child process, fencegate serve) for a ticket with the cell's token,
// over a connection pool whose bytes it counts, and sends the body to
// the ticket's URL itself, over another pool, with the ticket's headers.
// A store that refuses the write because the object changed (412, on a
// hot object) is asked again on a new ticket, up to writeAttempts
// tickets, as api/client's PutObjectOnTicket does; then it is a
// conflict. Its tokens are the gateway mode's: a new, larger one each
// write in the raise pattern, benchToken otherwise.
const modeTicket = "ticket"

// The ticket cells of the short set, and the verdicts on them.
const (
	// The short set's 1 KiB ticket cell is the raise shape's (raise.go),
	// at 64 writers: ticket_c64_ratio_vs_direct_sdk.
	ticketShortPattern     = patternRaise
	ticketShortSize        = 1 << 10
	ticketShortConcurrency = 64
	// ticketLargeBytes is --ticket-large-bytes' default, the body of the
	// large ticket shape: ticket_64mib_ratio_vs_direct_sdk and
	// ticket_64mib_gw_cpu_ms_per_write are its figures.
	ticketLargeBytes = 64 << 20
	// ticketLargeConcurrency is the large shape's writers: two keep both
	// cores of the bench machine busy (one direct-sdk writer leaves a
	// core idle, four write no faster), so that a ticket's request to
	// the gateway overlaps the other writer's body, as it would under
	// load.
	ticketLargeConcurrency = 2
	// ticketLargeWindows is the large shape's window as a multiple of
	// --duration: its writes take about 0.3 s each, and a cell counts
	// the writes that end in its window, so that a short one would
	// count too few for a ratio within a few percent.
	ticketLargeWindows = 3
	// ticketLargeRatioFloor is the least ticket_64mib_ratio_vs_direct_sdk
	// a run passes with.
	ticketLargeRatioFloor = 0.9
	// ticketGatewayBytesCeiling bounds ticket_gw_bytes_per_write: a run
	// fails at or above it.
	ticketGatewayBytesCeiling = 1024
)

// ticketShortShape reports whether a shape is the short set's 1 KiB
// ticket shape.
func ticketShortShape(pattern string, size int64, concurrency int) bool {
	return pattern == ticketShortPattern && size == ticketShortSize && concurrency == ticketShortConcurrency
}

// addTicketLargeFlag adds --ticket-large-bytes to fs, setting *n.
func addTicketLargeFlag(fs *flag.FlagSet, n *byteSize) {
	*n = ticketLargeBytes
	fs.Var(n, "ticket-large-bytes", "body size of the large ticket shape: direct-sdk and ticket writers of that size, a new token each write,\nwhen the modes have ticket (0: none)")
}

// ticketLargeShape reports whether a shape is the large ticket shape of
// cfg.
func ticketLargeShape(cfg config, pattern string, size int64, concurrency int) bool {
	return cfg.ticketLargeBytes > 0 && pattern == patternRaise && size == cfg.ticketLargeBytes && concurrency == ticketLargeConcurrency
}

// ticketLargeCells returns the large ticket shape's cells, direct-sdk and
// ticket as cfg.modes has them, when it has ticket; planned holds the
// run's other cells, and a cell already there is not planned again.
func ticketLargeCells(cfg config, planned []cell) []cell {
	if !slices.Contains(cfg.modes, modeTicket) || cfg.ticketLargeBytes <= 0 {
		return nil
	}
	var cells []cell
	for _, m := range cfg.modes {
		c := cell{m, patternRaise, cfg.ticketLargeBytes, ticketLargeConcurrency}
		if (m == modeDirectSDK || m == modeTicket) && !slices.Contains(planned, c) {
			cells = append(cells, c)
		}
	}
	return cells
}

// window returns a cell's measurement time over all its rounds:
// cfg.duration, ticketLargeWindows times it in the large ticket shape,
// and s3APIWindows times it in the S3 API cells' shape (s3api.go).
func (cfg config) window(c cell) time.Duration {
	switch {
	case ticketLargeShape(cfg, c.pattern, c.size, c.concurrency):
		return ticketLargeWindows * cfg.duration
	case !c.stale() && s3APIShape(c.pattern, c.size, c.concurrency):
		return s3APIWindows * cfg.duration
	}
	return cfg.duration
}

// ticketClients are modeTicket's two connection pools: the gateway's,
// whose bytes written it counts, and the store's.
type ticketClients struct {
	gateway *http.Client
	store   *http.Client
	// sent is every byte written to the gateway's connections (request
	// lines, headers and bodies): what the gateway read.
	sent atomic.Int64
}

func newTicketClients(pool int) *ticketClients {
	t := &ticketClients{store: newHTTPClient(pool)}
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t.gateway = &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        pool,
		MaxIdleConnsPerHost: pool,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &countingConn{Conn: conn, written: &t.sent}, nil
		},
	}}
	return t
}

func (t *ticketClients) close() {
	if t == nil {
		return
	}
	t.gateway.CloseIdleConnections()
	t.store.CloseIdleConnections()
}

// countingConn is a connection that adds the bytes written to it to
// written.
type countingConn struct {
	net.Conn
	written *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

// ticketPut is modeTicket: a ticket from the gateway at base, with
// nextToken's token, then the body on it, straight to the store.
func ticketPut(clients *ticketClients, base, bucket string, size int64, nextToken func(*worker) string) operation {
	prefix := base + "/v1/tickets/" + bucket + "/"
	request := []byte(`{"size":` + strconv.FormatInt(size, 10) + `}`)
	return func(ctx context.Context, w *worker) (outcome, error) {
		token := nextToken(w)
		for range writeAttempts {
			t, status, body, err := issueTicket(ctx, clients.gateway, prefix+w.key, token, request)
			switch {
			case err != nil:
				return outcomeError, fmt.Errorf("ticket: %w", err)
			case status == http.StatusConflict && bytes.Contains(body, []byte("concurrent-modification")):
				return outcomeConflict, nil
			case status != http.StatusCreated:
				return outcomeError, fmt.Errorf("ticket: %w", &errStatus{status, string(body)})
			}
			status, body, err = sendOnTicket(ctx, clients.store, t, w.nextBody(), size)
			switch {
			case err != nil:
				return outcomeError, fmt.Errorf("put on ticket: %w", err)
			case status == http.StatusOK:
				return outcomeOK, nil
			case status == http.StatusPreconditionFailed || status == http.StatusConflict:
				continue // the object changed since the gateway observed it
			}
			return outcomeError, fmt.Errorf("put on ticket: %w", &errStatus{status, string(body)})
		}
		return outcomeConflict, nil
	}
}

// issueTicket asks the gateway for a ticket at url (POST
// /v1/tickets/{bucket}/{key}) with token and the JSON request. The ticket
// is the answer's when the status is 201.
func issueTicket(ctx context.Context, client *http.Client, url, token string, request []byte) (api.Ticket, int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(request))
	if err != nil {
		return api.Ticket{}, 0, nil, err
	}
	req.Header.Set(api.HeaderFenceToken, token)
	req.Header.Set("Content-Type", "application/json")
	status, body, err := send(client, req)
	if err != nil || status != http.StatusCreated {
		return api.Ticket{}, status, body, err
	}
	var t api.Ticket
	if err := json.Unmarshal(body, &t); err != nil {
		return api.Ticket{}, 0, nil, fmt.Errorf("ticket answer: %w", err)
	}
	return t, status, body, nil
}

// sendOnTicket sends body, of size bytes, as t says: its method, URL and
// headers, Content-Length from size.
func sendOnTicket(ctx context.Context, client *http.Client, t api.Ticket, body io.Reader, size int64) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, t.Method, t.URL, body)
	if err != nil {
		return 0, nil, err
	}
	for name, value := range t.Headers {
		if name != "Content-Length" {
			req.Header.Set(name, value)
		}
	}
	req.ContentLength = size
	return send(client, req)
}
