package gateway

import (
	"context"
	"net/http"

	"fencegate/api"
	"fencegate/rest"
)

// openAPIStores answers the listings (see TestOpenAPIAnswers): one item
// each, or the error named after the method.

var _ rest.Inspector = openAPIStores{}

func (s openAPIStores) Marks(context.Context, api.Resource, api.Resource, int) (api.MarkPage, error) {
	return api.MarkPage{Marks: []api.Mark{{Resource: "s3/dev/k", Token: 4, Revision: 9}}}, s.errs["Marks"]
}

func (s openAPIStores) Locks(context.Context, string, string, int) (api.LockPage, error) {
	return api.LockPage{Locks: []api.LockQueue{{Name: "report", Holder: 5, QueueLength: 2, Waiters: []api.Token{6}}}}, s.errs["Locks"]
}

func (s openAPIStores) InFlight(context.Context, api.Resource, api.Resource, int) (api.InFlightPage, error) {
	return api.InFlightPage{Markers: []api.InFlightMarker{{Resource: "partner/payments/a1", Token: 5, Revision: 9}}}, s.errs["InFlight"]
}

// openAPIConsole stands for the console's files: the page at /ui/, 404
// for anything else.
var openAPIConsole = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/ui/" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte("<!doctype html>"))
})
