package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/gateway"
	"fencegate/tokenstore"
)

// TestListingsAuthorizePerItem lists marks and locks on real etcd as
// identities with different grants: each sees only the items it may see,
// and lock tokens only where it is admin.
func TestListingsAuthorizePerItem(t *testing.T) {
	e := newStackEnv(t)
	store, backend := e.connect(t, tokenstore.Config{RequestTimeout: 5 * time.Second})
	sum := func(key string) [32]byte { return sha256.Sum256([]byte(key)) }
	grant := func(prefix string, ops ...edge.Operation) edge.Grant {
		return edge.Grant{Prefix: prefix, Operations: ops}
	}
	a := "s3/" + e.bucket + "/a/"
	auth := edge.Auth{
		Identities: []edge.Identity{
			{Name: "admin", Grants: []edge.Grant{grant("", edge.OpAdmin)}},
			{Name: "reader-a", Grants: []edge.Grant{grant(a, edge.OpRead)}},
			{Name: "locker-a", Grants: []edge.Grant{grant("team-a.", edge.OpLock)}},
			{Name: "ops-a", Grants: []edge.Grant{grant("team-a.", edge.OpAdmin)}},
		},
		APIKeys: []edge.APIKey{
			{SHA256: sum("admin"), Identity: "admin"}, {SHA256: sum("reader-a"), Identity: "reader-a"},
			{SHA256: sum("locker-a"), Identity: "locker-a"}, {SHA256: sum("ops-a"), Identity: "ops-a"},
		},
	}
	gw, err := gateway.New(gateway.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store, backend,
		gateway.WithLocks(store), gateway.WithInspection(store), gateway.WithAuth(auth))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)

	ctx := context.Background()
	for _, r := range []string{a + "1", a + "2", "s3/" + e.bucket + "/b/1"} {
		if err := store.FenceCheck(ctx, api.Resource(r), 7); err != nil {
			t.Fatal(err)
		}
	}
	tokens := map[string]api.Token{}
	for _, name := range []string{"team-a.report", "team-b.report"} {
		sess, err := store.CreateSession(ctx, 30, "admin")
		if err != nil {
			t.Fatal(err)
		}
		g, err := store.Acquire(ctx, name, sess.ID, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = g.Token
	}

	get := func(key, target string, v any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+target, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s as %s = %d %s", target, key, res.StatusCode, body)
		}
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v: %s", target, err, body)
		}
	}
	type marks struct {
		Marks []struct{ Resource, HWM string }
		Next  string
	}
	resources := func(m marks) []string {
		var out []string
		for _, x := range m.Marks {
			out = append(out, x.Resource+"="+x.HWM)
		}
		return out
	}
	prefix := "/v1/fences?prefix=s3/" + e.bucket + "/"
	var m marks
	get("admin", prefix, &m)
	if got, want := resources(m), []string{a + "1=7", a + "2=7", "s3/" + e.bucket + "/b/1=7"}; !slices.Equal(got, want) || m.Next != "" {
		t.Fatalf("admin's marks = %v, next %q; want %v and no next", got, m.Next, want)
	}
	get("reader-a", prefix, &m)
	if got, want := resources(m), []string{a + "1=7", a + "2=7"}; !slices.Equal(got, want) {
		t.Fatalf("reader-a's marks = %v; want %v only", got, want)
	}
	get("reader-a", prefix+"&limit=1", &m)
	if got := resources(m); len(got) != 1 || m.Next != a+"1" {
		t.Fatalf("reader-a's first page of 1 = %v, next %q; want %s1 and next %s1", got, m.Next, a, a)
	}
	get("reader-a", prefix+"&limit=2&after="+a+"2", &m)
	if got := resources(m); len(got) != 0 {
		t.Fatalf("reader-a's page after %s2 = %v; want none (b/1 is not readable)", a, got)
	}

	type locks struct {
		Locks []struct {
			Name, Holder string
			QueueLength  int64 `json:"queue_length"`
		}
	}
	var l locks
	get("locker-a", "/v1/locks", &l)
	if len(l.Locks) != 1 || l.Locks[0].Name != "team-a.report" || l.Locks[0].Holder != "" || l.Locks[0].QueueLength != 1 {
		t.Fatalf("locker-a's locks = %+v; want team-a.report alone, without its token", l.Locks)
	}
	get("ops-a", "/v1/locks", &l)
	if len(l.Locks) != 1 || l.Locks[0].Holder != tokens["team-a.report"].String() {
		t.Fatalf("ops-a's locks = %+v; want team-a.report with holder %d", l.Locks, tokens["team-a.report"])
	}
	get("admin", "/v1/locks", &l)
	if len(l.Locks) != 2 || l.Locks[1].Holder != tokens["team-b.report"].String() {
		t.Fatalf("admin's locks = %+v; want both, with tokens", l.Locks)
	}
}
