package gateway_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/events"
	"fencegate/gateway"
	"fencegate/tokenstore"
)

// TestEventsUnauthenticatedRefusalsLimited: writes refused 401 (no key,
// an unknown key) carry a resource and token their sender picks, at no
// cost to it; the feed publishes them at the rate their log lines are
// limited to (Config.AuthRefusalLogRate, AuthRefusalLogBurst), and
// counts the rest in fencegate_events_suppressed_total. On a clock that
// does not move, 60 of them publish the burst, 20, and the decisions of
// known identities that follow (a 403, an accepted write) still arrive,
// each.
func TestEventsUnauthenticatedRefusalsLimited(t *testing.T) {
	const (
		flood = 60
		burst = 20 // the default
	)
	clock := &fakeClock{now: time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)}
	operatorKey, operatorAPIKey := newKey(t, "operator")
	readerKey, readerAPIKey := newKey(t, "reader")
	unknownKey, _ := newKey(t, "nobody")
	e := newEventsEnv(t, gateway.Config{Now: clock.Now}, nil, func(bucket string, _ *tokenstore.Store) gateway.Option {
		return gateway.WithAuth(edge.Auth{
			Identities: []edge.Identity{
				{Name: "operator", Grants: []edge.Grant{{Prefix: "", Operations: []edge.Operation{edge.OpAdmin}}}},
				{Name: "reader", Grants: []edge.Grant{{Prefix: "s3/" + bucket + "/", Operations: []edge.Operation{edge.OpRead}}}},
			},
			APIKeys: []edge.APIKey{operatorAPIKey, readerAPIKey},
		})
	})
	s := subscribe(t, nil, e.url, "", operatorKey).read()
	write := func(key, apiKey, token string, status int) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPut, e.objectURL(key), strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(api.HeaderFenceToken, token)
		if apiKey != "" {
			req.Header.Set("Authorization", "Bearer "+apiKey)
		}
		if r := send(t, req); r.status != status {
			t.Fatalf("PUT %s: %s; want %d", key, r, status)
		}
	}
	for i := range flood {
		key := ""
		if i%2 == 1 {
			key = unknownKey
		}
		write(fmt.Sprintf("flood-%d", i), key, strconv.Itoa(1000+i), http.StatusUnauthorized)
	}
	write("known", readerKey, "5", http.StatusForbidden)
	write("known", operatorKey, "5", http.StatusCreated)

	published := 0
	for {
		d := s.next(t).decision(t)
		if d["status"] == float64(http.StatusUnauthorized) {
			published++
			continue
		}
		wantFields(t, d, map[string]any{"kind": events.KindWriteRefused, "status": 403.0, "identity": "reader", "resource": "s3/" + e.bucket + "/known"})
		wantFields(t, s.nextDecision(t, events.KindWriteAccepted), map[string]any{"identity": "operator", "resource": "s3/" + e.bucket + "/known"})
		break
	}
	if published != burst {
		t.Errorf("%d of %d unauthenticated refusals published; want the burst, %d", published, flood, burst)
	}
	if got := metricValue(t, e.url, "fencegate_events_suppressed_total"); got != flood-burst {
		t.Errorf("fencegate_events_suppressed_total = %v; want %d", got, flood-burst)
	}
}
