package console_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleShowsEarlierWrites: a console opened after a write shows
// it, from the gateway's history, then live writes after it; connecting
// again (the Connect button) shows each once, not twice.
func TestConsoleShowsEarlierWrites(t *testing.T) {
	e := newConsoleEnv(t)
	if s := e.put(t, "before.csv", 5, "written before the console opened"); s != http.StatusCreated {
		t.Fatalf("PUT with token 5: %d; want 201", s)
	}
	tab := e.tab(t, adminKey)
	waitLive(t, tab)
	waitDOM(t, tab, "the earlier write's row", rowExpr(map[string]string{"kind": "write.accepted", "resource": "s3/demo/before.csv", "token": "5"}))
	if s := e.put(t, "before.csv", 6, "written after"); s != http.StatusOK {
		t.Fatalf("PUT with token 6: %d; want 200", s)
	}
	waitDOM(t, tab, "the live write's row", rowExpr(map[string]string{"kind": "write.accepted", "resource": "s3/demo/before.csv", "token": "6"}))
	run(t, tab, chromedp.Click(chromedp.CSS("#connect")))
	waitLive(t, tab)
	waitDOM(t, tab, "both rows again, each once", `document.querySelectorAll('#decisions tbody tr[data-resource="s3/demo/before.csv"]').length === 2`)
	screenshot(t, tab, "history")
}

// TestConsoleDeepLink: a link to a view opens that view: #resources with
// a resource's name finds its mark (the listing narrowed to it, its row
// marked found), and the address follows the view a click shows, so it
// can be copied as a link. A decision's resource links to it.
func TestConsoleDeepLink(t *testing.T) {
	e := newConsoleEnv(t)
	for _, key := range []string{"deep/a.csv", "deep/b.csv", "other.csv"} {
		if s := e.put(t, key, 3, key); s != http.StatusCreated {
			t.Fatalf("PUT %s: %d; want 201", key, s)
		}
	}
	tab := e.tabAt(t, adminKey, "/ui/#resources?resource="+url.QueryEscape("s3/demo/deep/b.csv"))
	waitDOM(t, tab, "the resources view, shown", `!document.getElementById('view-resources').hidden && document.getElementById('view-decisions').hidden`)
	waitDOM(t, tab, "b.csv's mark, found", `document.querySelector('#marks tr.found[data-resource="s3/demo/deep/b.csv"][data-hwm="3"]') !== null`)
	waitDOM(t, tab, "the listing narrowed to it", `document.querySelectorAll('#marks tbody tr[data-resource]').length === 1`)
	var find string
	eval(t, tab, `document.getElementById('marks-find').value`, &find)
	if find != "s3/demo/deep/b.csv" {
		t.Errorf("the find box reads %q; want the linked resource", find)
	}
	screenshot(t, tab, "deep-link")

	// A prefix lists what is under it.
	var set bool
	eval(t, tab, `(location.hash = '#resources?prefix=' + encodeURIComponent('s3/demo/deep/'), true)`, &set)
	waitDOM(t, tab, "the marks under s3/demo/deep/", `document.querySelectorAll('#marks tbody tr[data-resource^="s3/demo/deep/"]').length === 2 && document.querySelector('#marks tr[data-resource="s3/demo/other.csv"]') === null`)

	// Clicking a tab puts its link in the address bar.
	show(t, tab, "locks")
	waitDOM(t, tab, "the address names the locks view", `location.hash === '#locks'`)

	// A decision's resource is a link to it in the resources view.
	show(t, tab, "decisions")
	waitDOM(t, tab, "other.csv's row", rowExpr(map[string]string{"resource": "s3/demo/other.csv"}))
	run(t, tab, chromedp.Click(chromedp.CSS(`#decisions tr[data-resource="s3/demo/other.csv"] a.resource`)))
	waitDOM(t, tab, "other.csv found in the resources view", `!document.getElementById('view-resources').hidden && document.querySelector('#marks tr.found[data-resource="s3/demo/other.csv"]') !== null`)
}

// TestConsoleResumeGap: a page whose feed resumes with an id the gateway
// did not issue in this run (as after a restart of the gateway) sends it
// as Last-Event-ID and shows the gap event as a warning, then the
// decisions the gateway holds.
func TestConsoleResumeGap(t *testing.T) {
	e := newConsoleEnv(t)
	tab := e.tab(t, adminKey)
	waitLive(t, tab)
	if s := e.put(t, "gap.csv", 4, "x"); s != http.StatusCreated {
		t.Fatalf("PUT: %d; want 201", s)
	}
	waitDOM(t, tab, "the write's row", rowExpr(map[string]string{"resource": "s3/demo/gap.csv"}))
	var hidden bool
	eval(t, tab, `document.getElementById('gap').hidden`, &hidden)
	if !hidden {
		t.Fatal("a gap warning before any gap")
	}
	// The page reconnects as it does after a broken stream, with the id
	// of the last event it read: here one of a run before a restart.
	var ok bool
	eval(t, tab, `(state.lastEventId = '0123456789ab-7', connectFeed(), true)`, &ok)
	waitDOM(t, tab, "the gap warning", `!document.getElementById('gap').hidden && document.getElementById('gap').textContent.includes('another run of the gateway')`)
	waitLive(t, tab)
}
