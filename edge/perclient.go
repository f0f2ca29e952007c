package edge

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
	if id := Caller(r.Context()); id != nil {
		return "identity:" + id.Name
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "addr:" + host
}

// LimitPerClient returns the middleware that refuses a request, with
// refuse (an error of class api.ErrTooManyRequests: 429 with
// Retry-After), when its client already has Config.MaxRequestsPerClient
// in flight, before it reaches etcd or S3. One client (a slow reader that
// opens connection after connection) can then hold at most that many S3
// connections, however many it opens.
func (e *Edge) LimitPerClient(refuse func(http.ResponseWriter, *http.Request, error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if e.perClient == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			client := clientOf(r)
			if !e.perClient.acquire(client) {
				refuse(w, r, fmt.Errorf("%w: %d object requests of this client in flight", api.ErrTooManyRequests, e.perClient.max))
				return
			}
			defer e.perClient.release(client)
			next.ServeHTTP(w, r)
		})
	}
}

// LimitClient counts a request of a door that authenticated it itself
// (WithIdentity), as the identity named name, against
// Config.MaxRequestsPerClient, as LimitPerClient counts the REST API's
// object requests: it returns the function that counts it out, or
// api.ErrTooManyRequests when the identity already has that many
// requests in flight. An identity's requests through every door count
// against one budget. A door calls it once the request's signature is
// verified: a request that only names an identity's access key must not
// take from its budget. Without a limit it always admits.
func (e *Edge) LimitClient(name string) (release func(), err error) {
	if e.perClient == nil {
		return func() {}, nil
	}
	client := "identity:" + name
	if !e.perClient.acquire(client) {
		return nil, fmt.Errorf("%w: %d requests of this client in flight", api.ErrTooManyRequests, e.perClient.max)
	}
	return func() { e.perClient.release(client) }, nil
}
