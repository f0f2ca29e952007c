package rest

// Read-only listings for the console (and any operator's script): the
// high-water marks, lock queues and partner requests in flight under a
// prefix, paged. Each listed item is authorized on its own, as a request
// for it alone would be, so that a caller sees only what it may see; an
// item it may not see is left out of the page, silently.

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/internal/fielderr"
)

// Inspector reads what the listings show, each as one page of a scan in
// key order. tokenstore.Store implements it. Errors wrapping
// api.ErrUnavailable mean the store could not answer.
type Inspector interface {
	// Marks reads up to limit high-water marks of resources that start
	// with prefix and sort after after.
	Marks(ctx context.Context, prefix, after api.Resource, limit int) (api.MarkPage, error)
	// Locks reads up to limit lock queues whose names start with prefix
	// and sort after after.
	Locks(ctx context.Context, prefix, after string, limit int) (api.LockPage, error)
	// InFlight reads up to limit in-flight markers of partner requests
	// whose resources start with prefix and sort after after.
	InFlight(ctx context.Context, prefix, after api.Resource, limit int) (api.InFlightPage, error)
}

// Listing limits: a page's default and largest size.
const (
	defaultListLimit = 100
	maxListLimit     = 1000
)

// WithInspection mounts the listings on store, which must not be nil:
//
//	GET /v1/fences?prefix=&after=&limit=  -> 200 {"marks": [{"resource", "hwm", "revision"}], "next"}
//	GET /v1/locks?prefix=&after=&limit=   -> 200 {"locks": [{"name", "holder", "queue_length", "waiters"}], "next"}
//	GET /v1/inflight?prefix=&after=&limit= -> 200 {"markers": [{"resource", "token", "revision"}], "next"}
//
// limit is 1 to 1000 (default 100); next, when not empty, is the after
// of the next page. Tokens are JSON strings (a browser's numbers hold 53
// bits, a token 63).
//
// Authorization is per item: a mark or an in-flight marker is listed when
// the caller may read its resource; a lock when the caller may lock it,
// and its tokens (holder and waiters) only when the caller is admin on
// it, since a lock's token is all that a write behind a "held" token
// check needs (see WithLocks). A page may so hold fewer items than limit,
// none at all, and still have a next.
func WithInspection(store Inspector) Option {
	if store == nil {
		panic("rest: WithInspection(nil)")
	}
	return func(g *API) {
		h := &inspectAPI{g: g, store: store}
		g.mounts = append(g.mounts, h.mount)
	}
}

// WithConsole serves ui, the console's static page, under /ui/ (and
// redirects /ui there). The page's files hold no data and are served
// without authentication, as /metrics is: a browser cannot add a bearer
// key to a navigation. Everything the page shows it fetches from the API
// with the caller's credentials (a bearer key it asks for, or the client
// certificate the browser presents), authorized as any client's request.
func WithConsole(ui http.Handler) Option {
	if ui == nil {
		panic("rest: WithConsole(nil)")
	}
	return func(g *API) {
		g.console = true
		g.mounts = append(g.mounts, func(r chi.Router) {
			r.Get("/ui", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
			})
			r.Method(http.MethodGet, "/ui/*", ui)
		})
	}
}

// ConsolePath reports whether path is one of the console's files, which
// authentication lets through when WithConsole mounted them.
func (g *API) ConsolePath(path string) bool {
	return g.console && (path == "/ui" || strings.HasPrefix(path, "/ui/"))
}

// inspectAPI serves the listings' routes.
type inspectAPI struct {
	g     *API
	store Inspector
}

func (h *inspectAPI) mount(r chi.Router) {
	r.Get("/v1/fences", h.listMarks)
	r.Get("/v1/locks", h.listLocks)
	r.Get("/v1/inflight", h.listInFlight)
}

// listQuery is a listing's query: prefix, after and limit.
type listQuery struct {
	prefix, after string
	limit         int
}

// parseListQuery reads a listing's query: each parameter at most once,
// no control characters, after starting with prefix, limit 1 to
// maxListLimit. Failures are api.ErrInvalidRequest.
func parseListQuery(r *http.Request) (listQuery, error) {
	q := listQuery{limit: defaultListLimit}
	values := r.URL.Query()
	one := func(name string) (string, error) {
		v := values[name]
		switch {
		case len(v) > 1:
			return "", fmt.Errorf("%w: at most one %q query parameter", api.ErrInvalidRequest, name)
		case len(v) == 0:
			return "", nil
		case len(v[0]) > maxResourceBytes || fielderr.HasControl(v[0]):
			return "", fmt.Errorf("%w: %q must be at most %d bytes, without control characters", api.ErrInvalidRequest, name, maxResourceBytes)
		}
		return v[0], nil
	}
	var err error
	if q.prefix, err = one("prefix"); err != nil {
		return q, err
	}
	if q.after, err = one("after"); err != nil {
		return q, err
	}
	if q.after != "" && !strings.HasPrefix(q.after, q.prefix) {
		return q, fmt.Errorf("%w: \"after\" must start with \"prefix\"", api.ErrInvalidRequest)
	}
	limit, err := one("limit")
	if err != nil {
		return q, err
	}
	if limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 || n > maxListLimit {
			return q, fmt.Errorf("%w: \"limit\" must be from 1 to %d", api.ErrInvalidRequest, maxListLimit)
		}
		q.limit = n
	}
	return q, nil
}

// markItem is a listed high-water mark.
type markItem struct {
	Resource api.Resource `json:"resource"`
	HWM      string       `json:"hwm"`
	Revision int64        `json:"revision"`
}

func (h *inspectAPI) listMarks(w http.ResponseWriter, r *http.Request) {
	q, err := parseListQuery(r)
	if err != nil {
		h.g.writeError(w, r, err)
		return
	}
	page, err := h.store.Marks(r.Context(), api.Resource(q.prefix), api.Resource(q.after), q.limit)
	if err != nil {
		h.g.writeError(w, r, err)
		return
	}
	out := struct {
		Marks []markItem `json:"marks"`
		Next  string     `json:"next"`
	}{Marks: []markItem{}}
	for _, m := range page.Marks {
		if h.g.authorize(r.Context(), edge.OpRead, m.Resource) == nil {
			out.Marks = append(out.Marks, markItem{Resource: m.Resource, HWM: m.Token.String(), Revision: m.Revision})
		}
	}
	if page.More && len(page.Marks) > 0 {
		out.Next = string(page.Marks[len(page.Marks)-1].Resource)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// lockItem is a listed lock queue; the tokens are empty for a caller that
// is not admin on the lock.
type lockItem struct {
	Name        string   `json:"name"`
	Holder      string   `json:"holder,omitempty"`
	QueueLength int64    `json:"queue_length"`
	Waiters     []string `json:"waiters,omitempty"`
}

func (h *inspectAPI) listLocks(w http.ResponseWriter, r *http.Request) {
	q, err := parseListQuery(r)
	if err != nil {
		h.g.writeError(w, r, err)
		return
	}
	page, err := h.store.Locks(r.Context(), q.prefix, q.after, q.limit)
	if err != nil {
		h.g.writeError(w, r, err)
		return
	}
	out := struct {
		Locks []lockItem `json:"locks"`
		Next  string     `json:"next"`
	}{Locks: []lockItem{}}
	ctx := r.Context()
	for _, l := range page.Locks {
		if h.g.authorize(ctx, edge.OpLock, api.Resource(l.Name)) != nil {
			continue
		}
		item := lockItem{Name: l.Name, QueueLength: l.QueueLength}
		if h.g.authorize(ctx, edge.OpAdmin, api.Resource(l.Name)) == nil {
			item.Holder = l.Holder.String()
			for _, t := range l.Waiters {
				item.Waiters = append(item.Waiters, t.String())
			}
		}
		out.Locks = append(out.Locks, item)
	}
	if page.More && len(page.Locks) > 0 {
		out.Next = page.Locks[len(page.Locks)-1].Name
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// markerItem is a listed in-flight marker.
type markerItem struct {
	Resource api.Resource `json:"resource"`
	Token    string       `json:"token"`
	Revision int64        `json:"revision"`
}

func (h *inspectAPI) listInFlight(w http.ResponseWriter, r *http.Request) {
	q, err := parseListQuery(r)
	if err != nil {
		h.g.writeError(w, r, err)
		return
	}
	page, err := h.store.InFlight(r.Context(), api.Resource(q.prefix), api.Resource(q.after), q.limit)
	if err != nil {
		h.g.writeError(w, r, err)
		return
	}
	out := struct {
		Markers []markerItem `json:"markers"`
		Next    string       `json:"next"`
	}{Markers: []markerItem{}}
	for _, m := range page.Markers {
		if h.g.authorize(r.Context(), edge.OpRead, m.Resource) == nil {
			out.Markers = append(out.Markers, markerItem{Resource: m.Resource, Token: m.Token.String(), Revision: m.Revision})
		}
	}
	if page.More && len(page.Markers) > 0 {
		out.Next = string(page.Markers[len(page.Markers)-1].Resource)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}
