package gateway

import (
	"fmt"
	"net"
	"net/http"
	"sync"

	"fencegate/api"
)

// clientCounts counts each client's object requests in flight, against
// Config.MaxRequestsPerClient. Its memory is one entry per client with a
// request in flight: entries go when their count does.
type clientCounts struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

// acquire counts a request of client in, or reports false when client
// already has max in flight.
func (c *clientCounts) acquire(client string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[client] >= c.max {
		return false
	}
	c.n[client]++
	return true
}

// release counts a request of client out.
func (c *clientCounts) release(client string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[client]--; c.n[client] <= 0 {
		delete(c.n, client)
	}
}

// clientOf names the client a request is counted against: its identity
// when auth is on, else the host of its remote address (behind a proxy,
// the proxy's: set the limit with that in mind).
func clientOf(r *http.Request) string {
	if id := callerIdentity(r.Context()); id != nil {
		return "identity:" + id.Name
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "addr:" + host
}

// limitPerClient refuses an object request, 429 with Retry-After, when its
// client already has Config.MaxRequestsPerClient in flight, before it
// reaches etcd or S3. One client (a slow reader that opens connection
// after connection) can then hold at most that many S3 connections,
// however many it opens.
func (g *Gateway) limitPerClient(next http.Handler) http.Handler {
	if g.perClient == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client := clientOf(r)
		if !g.perClient.acquire(client) {
			g.writeError(w, r, fmt.Errorf("%w: %d object requests of this client in flight", api.ErrTooManyRequests, g.perClient.max))
			return
		}
		defer g.perClient.release(client)
		next.ServeHTTP(w, r)
	})
}
