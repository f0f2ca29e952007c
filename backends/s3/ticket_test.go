package s3_test

import (
	"bufio"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"fencegate/api"
	"fencegate/backends/s3"
)

// The tests of tickets send them as a client would, with net/http (or a
// raw connection, to lie about lengths), and read the store back with
// minio-go, a client independent of the SDK that signed them. Each
// assertion is what versitygw v1.8.0 does; where AWS S3 documents
// otherwise, the comment says so, and docs/tickets.md has the matrix.

// storeAnswer is the store's answer to a ticket's request: its status and
// its S3 error code, empty on success.
type storeAnswer struct {
	Status int
	Code   string
	ETag   string
}

func (a storeAnswer) String() string { return fmt.Sprintf("%d %s", a.Status, a.Code) }

// useTicket sends tk with body, after edit (nil for none) changes the
// request, and returns the store's answer.
func useTicket(tb testing.TB, tk api.Ticket, body string, edit func(*http.Request)) storeAnswer {
	tb.Helper()
	a, err := sendTicket(tk, body, edit)
	if err != nil {
		tb.Fatalf("send ticket: %v", err)
	}
	return a
}

// sendTicket is useTicket for goroutines other than the test's: it
// returns its failure.
func sendTicket(tk api.Ticket, body string, edit func(*http.Request)) (storeAnswer, error) {
	req, err := http.NewRequest(tk.Method, tk.URL, strings.NewReader(body))
	if err != nil {
		return storeAnswer{}, err
	}
	for name, value := range tk.Headers {
		req.Header.Set(name, value)
	}
	if edit != nil {
		edit(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return storeAnswer{}, err
	}
	defer resp.Body.Close()
	return readAnswer(resp)
}

// readAnswer reads resp's status, ETag and S3 error code.
func readAnswer(resp *http.Response) (storeAnswer, error) {
	a := storeAnswer{Status: resp.StatusCode, ETag: resp.Header.Get("ETag")}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return storeAnswer{}, fmt.Errorf("read answer: %w", err)
	}
	var s3Error struct{ Code string }
	if resp.StatusCode >= 300 && xml.Unmarshal(body, &s3Error) == nil {
		a.Code = s3Error.Code
	}
	return a, nil
}

// useTicketRaw sends tk over a connection of its own with Content-Length:
// declared and then body, whatever their lengths; closeWrite ends the
// request's side of the connection after the body, as a client that gives
// up does. It returns the store's answer, or Status 0 when none came in 5
// seconds or the connection was closed first.
func useTicketRaw(tb testing.TB, tk api.Ticket, declared int, body string, closeWrite bool) storeAnswer {
	tb.Helper()
	u, err := url.Parse(tk.URL)
	if err != nil {
		tb.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	var req strings.Builder
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", tk.Method, u.RequestURI(), u.Host)
	for name, value := range tk.Headers {
		if name == "Content-Length" {
			value = strconv.Itoa(declared)
		}
		fmt.Fprintf(&req, "%s: %s\r\n", name, value)
	}
	req.WriteString("\r\n" + body)
	if _, err := io.WriteString(conn, req.String()); err != nil {
		tb.Fatal(err)
	}
	if closeWrite {
		conn.(*net.TCPConn).CloseWrite()
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return storeAnswer{}
	}
	defer resp.Body.Close()
	a, err := readAnswer(resp)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// stored is an object as minio-go reads it back; Exists false when there
// is none.
type stored struct {
	Exists      bool
	Body        string
	ContentType string
	// Metadata is the user metadata, by canonical header name without
	// X-Amz-Meta- ("Fence-Token").
	Metadata     map[string]string
	CacheControl string
}

func readTicketObject(tb testing.TB, p api.ObjectPath) stored {
	tb.Helper()
	ctx := context.Background()
	obj, err := server.Minio(tb).GetObject(ctx, p.Bucket, p.Key, minio.GetObjectOptions{})
	if err != nil {
		tb.Fatalf("minio get %s: %v", p.Key, err)
	}
	defer obj.Close()
	body, err := io.ReadAll(obj)
	if minio.ToErrorResponse(err).Code == "NoSuchKey" {
		return stored{}
	}
	if err != nil {
		tb.Fatalf("minio get %s: %v", p.Key, err)
	}
	info, err := obj.Stat()
	if err != nil {
		tb.Fatalf("minio stat %s: %v", p.Key, err)
	}
	return stored{Exists: true, Body: string(body), ContentType: info.ContentType, Metadata: info.UserMetadata, CacheControl: info.Metadata.Get("Cache-Control")}
}

// ticketFor returns a ticket of c for req, failing the test on an error.
func ticketFor(tb testing.TB, c *s3.Client, req api.TicketRequest) api.Ticket {
	tb.Helper()
	tk, err := c.PresignPut(context.Background(), req)
	if err != nil {
		tb.Fatalf("PresignPut(%+v) = %v", req, err)
	}
	return tk
}

// TestTicketSignsEveryHeader checks what a ticket is: a presigned PUT
// whose X-Amz-SignedHeaders are exactly host and the headers it tells the
// client to send, expiring when it says.
func TestTicketSignsEveryHeader(t *testing.T) {
	c := newClient(t, server.Endpoint(), 0)
	signedAt := time.Date(2026, 12, 7, 3, 20, 0, 700e6, time.UTC)
	c = s3.WithClock(c, func() time.Time { return signedAt })
	p := api.ObjectPath{Bucket: "b", Key: "dir/report.csv"}
	tests := []struct {
		name        string
		req         api.TicketRequest
		wantHeaders map[string]string
		wantExpires time.Duration
	}{
		{
			"create, every field",
			api.TicketRequest{Path: p, Token: 42, Size: 11, ContentType: "text/csv", Metadata: map[string]string{"owner": "team-a", "run": "7"}, Expires: 30 * time.Second},
			map[string]string{"Content-Length": "11", "Content-Type": "text/csv", "If-None-Match": "*", "X-Amz-Meta-Fence-Token": "42", "X-Amz-Meta-Owner": "team-a", "X-Amz-Meta-Run": "7"},
			30 * time.Second,
		},
		{
			"replace, default expiry, no content type, no metadata",
			api.TicketRequest{Path: p, Replaces: api.ObjectVersion{Exists: true, ETag: `"0123abcd"`}, Token: 43, Size: 1},
			map[string]string{"Content-Length": "1", "If-Match": `"0123abcd"`, "X-Amz-Meta-Fence-Token": "43"},
			api.DefaultTicketExpiry,
		},
		{
			// The gateway's unconditional-ticket test hook, wrong on purpose.
			"unsafe unconditional: no condition",
			api.TicketRequest{Path: p, Replaces: api.ObjectVersion{Exists: true, ETag: `"0123abcd"`}, Token: 44, Size: 1, UnsafeUnconditional: true},
			map[string]string{"Content-Length": "1", "X-Amz-Meta-Fence-Token": "44"},
			api.DefaultTicketExpiry,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := ticketFor(t, c, tt.req)
			if tk.Method != http.MethodPut || !maps.Equal(tk.Headers, tt.wantHeaders) {
				t.Fatalf("PresignPut = %s %v; want PUT %v", tk.Method, tk.Headers, tt.wantHeaders)
			}
			u, err := url.Parse(tk.URL)
			if err != nil {
				t.Fatal(err)
			}
			if want := "/b/dir/report.csv"; u.Path != want {
				t.Errorf("path %q; want %q", u.Path, want)
			}
			q := u.Query()
			var wantSigned []string
			for name := range tt.wantHeaders {
				wantSigned = append(wantSigned, strings.ToLower(name))
			}
			wantSigned = append(wantSigned, "host")
			slices.Sort(wantSigned)
			if got := q.Get("X-Amz-SignedHeaders"); got != strings.Join(wantSigned, ";") {
				t.Errorf("X-Amz-SignedHeaders = %q; want %q", got, strings.Join(wantSigned, ";"))
			}
			if got, want := q.Get("X-Amz-Expires"), strconv.Itoa(int(tt.wantExpires/time.Second)); got != want {
				t.Errorf("X-Amz-Expires = %q; want %q", got, want)
			}
			if got := q.Get("X-Amz-Date"); got != "20261207T032000Z" {
				t.Errorf("X-Amz-Date = %q; want the signing time, 20261207T032000Z", got)
			}
			if want := signedAt.Truncate(time.Second).Add(tt.wantExpires); !tk.ExpiresAt.Equal(want) {
				t.Errorf("ExpiresAt = %v; want %v", tk.ExpiresAt, want)
			}
			for name := range q {
				if strings.HasPrefix(strings.ToLower(name), "x-amz-") && !slices.Contains([]string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature"}, name) {
					t.Errorf("query parameter %s: a header hoisted into the query, not signed as a header", name)
				}
			}
		})
	}
}

// TestTicketRefusesInvalidRequests: a request that api refuses is never
// signed.
func TestTicketRefusesInvalidRequests(t *testing.T) {
	c := newClient(t, server.Endpoint(), 0)
	p := api.ObjectPath{Bucket: "b", Key: "k"}
	for _, req := range []api.TicketRequest{
		{Path: p, Token: 1, Size: 0},
		{Path: p, Token: 0, Size: 1},
		{Path: p, Token: 1, Size: 1, Replaces: api.ObjectVersion{Exists: true}},
		{Path: p, Token: 1, Size: 1, Metadata: map[string]string{api.MetadataFenceToken: "9"}},
		{Path: p, Token: 1, Size: 1, Expires: time.Millisecond},
	} {
		if tk, err := c.PresignPut(context.Background(), req); !errors.Is(err, api.ErrInvalidRequest) {
			t.Errorf("PresignPut(%+v) = %+v, %v; want ErrInvalidRequest", req, tk, err)
		}
	}
	part := api.PartTicketRequest{Path: p, UploadID: "u", PartNumber: 0, Size: 1}
	if tk, err := c.PresignUploadPart(context.Background(), part); !errors.Is(err, api.ErrInvalidRequest) {
		t.Errorf("PresignUploadPart(%+v) = %+v, %v; want ErrInvalidRequest", part, tk, err)
	}
}

// TestTicketFreshWriteLands: a fresh ticket stores the client's bytes
// with the token, the content type and the metadata, for keys that need
// escaping too (a ticket signed with the path escaped twice would not
// verify for them).
func TestTicketFreshWriteLands(t *testing.T) {
	server.CreateBucket(t, "ticket-fresh")
	c := newClient(t, server.Endpoint(), 0)
	for _, key := range []string{"plain", "dir/sub/obj.csv", "with space", "plus+sign", "percent%25", "équipe", "a//double", "q?x=1&y", "tilde~star*"} {
		t.Run(key, func(t *testing.T) {
			p := api.ObjectPath{Bucket: "ticket-fresh", Key: key}
			body := "bytes of " + key
			tk := ticketFor(t, c, api.TicketRequest{Path: p, Token: 7, Size: int64(len(body)), ContentType: "text/csv", Metadata: map[string]string{"owner": "team-a"}})
			if a := useTicket(t, tk, body, nil); a.Status != http.StatusOK {
				t.Fatalf("ticket write = %v; want 200", a)
			}
			got := readTicketObject(t, p)
			if got.Body != body || got.ContentType != "text/csv" || got.Metadata["Fence-Token"] != "7" || got.Metadata["Owner"] != "team-a" {
				t.Fatalf("read back %+v; want %q, text/csv, Fence-Token 7, Owner team-a", got, body)
			}
		})
	}
}

// TestTicketConditionEnforced: a ticket lands only while the object is
// the version observed before the fence check, as the gateway's own
// conditional write does; when it is not, the store answers 412 and the
// bytes that are there stay.
func TestTicketConditionEnforced(t *testing.T) {
	server.CreateBucket(t, "ticket-cond")
	c := newClient(t, server.Endpoint(), 0)
	tests := []struct {
		name string
		// setup writes what is there before the ticket is signed, and
		// returns the version observed ("" for none).
		setup func(p api.ObjectPath) api.ObjectVersion
		// meanwhile runs between the ticket's signing and its use: a
		// newer holder's write.
		meanwhile func(p api.ObjectPath)
		// want is the ticket's answer; wantBody the bytes then stored.
		want     int
		wantBody string
	}{
		{
			"must not exist, nobody wrote", noObject, nil,
			http.StatusOK, "late bytes",
		},
		{
			"must not exist, a newer holder created it", noObject,
			func(p api.ObjectPath) { mustPut(t, c, p, "newer bytes", 9, api.ObjectVersion{}) },
			http.StatusPreconditionFailed, "newer bytes",
		},
		{
			"If-Match the observed ETag, nobody wrote", existing(t, c, "old bytes"), nil,
			http.StatusOK, "late bytes",
		},
		{
			"If-Match the observed ETag, a newer holder replaced it", existing(t, c, "old bytes"),
			func(p api.ObjectPath) { mustPut(t, c, p, "newer bytes", 9, observe(t, c, p)) },
			http.StatusPreconditionFailed, "newer bytes",
		},
		{
			// AWS S3 answers an If-Match on a missing key 404 NoSuchKey
			// too; either way nothing is stored.
			"If-Match the observed ETag, a newer holder deleted it", existing(t, c, "old bytes"),
			func(p api.ObjectPath) { deleteObject(t, c, p) },
			http.StatusNotFound, "",
		},
		// The ETag ABA of docs/guarantees.md, which a ticket keeps for
		// as long as it lives: the object went back to what was observed.
		{
			"ABA: If-Match the observed ETag, a newer holder wrote the same bytes", existing(t, c, "old bytes"),
			func(p api.ObjectPath) { mustPut(t, c, p, "old bytes", 9, observe(t, c, p)) },
			http.StatusOK, "late bytes",
		},
		{
			"ABA: must not exist, a newer holder created and deleted it", noObject,
			func(p api.ObjectPath) {
				mustPut(t, c, p, "newer bytes", 9, api.ObjectVersion{})
				deleteObject(t, c, p)
			},
			http.StatusOK, "late bytes",
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := api.ObjectPath{Bucket: "ticket-cond", Key: fmt.Sprint("k", i)}
			observed := tt.setup(p)
			tk := ticketFor(t, c, api.TicketRequest{Path: p, Replaces: observed, Token: 8, Size: int64(len("late bytes"))})
			if tt.meanwhile != nil {
				tt.meanwhile(p)
			}
			if a := useTicket(t, tk, "late bytes", nil); a.Status != tt.want {
				t.Fatalf("ticket write = %v; want %d", a, tt.want)
			}
			if got := readTicketObject(t, p); got.Body != tt.wantBody {
				t.Fatalf("read back %q; want %q", got.Body, tt.wantBody)
			}
		})
	}
}

// noObject is a setup of TestTicketConditionEnforced: no object.
func noObject(api.ObjectPath) api.ObjectVersion { return api.ObjectVersion{} }

// existing is a setup of TestTicketConditionEnforced: an object of body
// written with token 1.
func existing(tb testing.TB, c *s3.Client, body string) func(api.ObjectPath) api.ObjectVersion {
	return func(p api.ObjectPath) api.ObjectVersion {
		mustPut(tb, c, p, body, 1, api.ObjectVersion{})
		return observe(tb, c, p)
	}
}

func deleteObject(tb testing.TB, c *s3.Client, p api.ObjectPath) {
	tb.Helper()
	if err := c.Delete(context.Background(), p, observe(tb, c, p).ETag); err != nil {
		tb.Fatalf("delete %s: %v", p.Key, err)
	}
}

func mustPut(tb testing.TB, c *s3.Client, p api.ObjectPath, body string, token api.Token, replaces api.ObjectVersion) {
	tb.Helper()
	if _, err := put(context.Background(), c, p, body, token, replaces); err != nil {
		tb.Fatalf("put %s: %v", p.Key, err)
	}
}

func observe(tb testing.TB, c *s3.Client, p api.ObjectPath) api.ObjectVersion {
	tb.Helper()
	v, err := c.Observe(context.Background(), p)
	if err != nil {
		tb.Fatalf("observe %s: %v", p.Key, err)
	}
	return v
}

// TestTicketUsedTwice: a ticket is not consumed by its use, it is
// conditional: its first write changes the object, so a second use is
// refused (412), and so is one after a newer write. The one exception is
// the ETag ABA: a replace ticket whose bytes are those of the version it
// replaces leaves the ETag (the MD5 of the bytes) it is conditional on,
// and lands again, changing nothing.
func TestTicketUsedTwice(t *testing.T) {
	server.CreateBucket(t, "ticket-twice")
	c := newClient(t, server.Endpoint(), 0)
	const body = "ticket bytes"
	tests := []struct {
		name      string
		setup     func(api.ObjectPath) api.ObjectVersion
		second    string
		meanwhile func(api.ObjectPath)
		want      int
		wantBody  string
	}{
		{"create ticket, again", noObject, body, nil, http.StatusPreconditionFailed, body},
		{"create ticket, again after a newer write", noObject, body,
			func(p api.ObjectPath) { mustPut(t, c, p, "newer bytes", 9, observe(t, c, p)) },
			http.StatusPreconditionFailed, "newer bytes"},
		{"replace ticket, again after a newer write", existing(t, c, "old bytes"), body,
			func(p api.ObjectPath) { mustPut(t, c, p, "newer bytes", 9, observe(t, c, p)) },
			http.StatusPreconditionFailed, "newer bytes"},
		{"replace ticket, again with other bytes", existing(t, c, "old bytes"), "other bytes!", nil, http.StatusPreconditionFailed, body},
		{"replace ticket, again", existing(t, c, "old bytes"), body, nil, http.StatusPreconditionFailed, body},
		{"ABA: replace ticket writing the bytes it replaces, again", existing(t, c, body), body, nil, http.StatusOK, body},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := api.ObjectPath{Bucket: "ticket-twice", Key: fmt.Sprint("k", i)}
			tk := ticketFor(t, c, api.TicketRequest{Path: p, Replaces: tt.setup(p), Token: 8, Size: int64(len(body))})
			if a := useTicket(t, tk, body, nil); a.Status != http.StatusOK {
				t.Fatalf("first use = %v; want 200", a)
			}
			if tt.meanwhile != nil {
				tt.meanwhile(p)
			}
			if a := useTicket(t, tk, tt.second, nil); a.Status != tt.want {
				t.Fatalf("second use = %v; want %d", a, tt.want)
			}
			if got := readTicketObject(t, p); got.Body != tt.wantBody {
				t.Fatalf("read back %q; want %q", got.Body, tt.wantBody)
			}
		})
	}
}

// TestTicketExpiry: an expired ticket is refused (403 AccessDenied,
// "Request has expired") and stores nothing. versitygw refuses an upload
// that starts before the expiry and ends after it too; AWS S3 documents
// its check at the time of the request (docs/tickets.md).
func TestTicketExpiry(t *testing.T) {
	server.CreateBucket(t, "ticket-expiry")
	c := newClient(t, server.Endpoint(), 0)
	signedEarlier := s3.WithClock(c, func() time.Time { return time.Now().Add(-time.Minute) })
	tests := []struct {
		name string
		use  func(t *testing.T, p api.ObjectPath) storeAnswer
	}{
		{"signed a minute ago for 30 s", func(t *testing.T, p api.ObjectPath) storeAnswer {
			tk := ticketFor(t, signedEarlier, api.TicketRequest{Path: p, Token: 1, Size: 1, Expires: 30 * time.Second})
			return useTicket(t, tk, "x", nil)
		}},
		{"1 s ticket used after 2 s", func(t *testing.T, p api.ObjectPath) storeAnswer {
			tk := ticketFor(t, c, api.TicketRequest{Path: p, Token: 1, Size: 1, Expires: time.Second})
			time.Sleep(2 * time.Second)
			return useTicket(t, tk, "x", nil)
		}},
		{"1 s ticket whose body ends after 2.5 s", func(t *testing.T, p api.ObjectPath) storeAnswer {
			tk := ticketFor(t, c, api.TicketRequest{Path: p, Token: 1, Size: 2, Expires: time.Second})
			body, w := io.Pipe()
			go func() {
				io.WriteString(w, "a")
				time.Sleep(2500 * time.Millisecond)
				io.WriteString(w, "b")
				w.Close()
			}()
			return useTicket(t, tk, "", func(r *http.Request) { r.Body, r.ContentLength = body, 2 })
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := api.ObjectPath{Bucket: "ticket-expiry", Key: fmt.Sprint("k", i)}
			if a := tt.use(t, p); a.Status != http.StatusForbidden || a.Code != "AccessDenied" {
				t.Fatalf("expired ticket = %v; want 403 AccessDenied", a)
			}
			if got := readTicketObject(t, p); got.Exists {
				t.Fatalf("read back %+v; want no object", got)
			}
		})
	}
}

// TestTicketRefusesChangedRequests: a client that changes what the ticket
// signed (a header, the length, the query), drops a signed header, or
// adds an x-amz-* header is refused, and nothing is stored. versitygw
// answers a changed or dropped header SignatureDoesNotMatch and an
// unsigned x-amz-* header AccessDenied ("There were headers present in
// the request which were not signed"), as AWS S3 does.
func TestTicketRefusesChangedRequests(t *testing.T) {
	server.CreateBucket(t, "ticket-changed")
	c := newClient(t, server.Endpoint(), 0)
	const body = "hello"
	set := func(name, value string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set(name, value) }
	}
	tests := []struct {
		name     string
		edit     func(*http.Request)
		body     string
		wantCode string
	}{
		{"other content type", set("Content-Type", "text/html"), body, "SignatureDoesNotMatch"},
		{"other metadata value", set("X-Amz-Meta-Owner", "team-b"), body, "SignatureDoesNotMatch"},
		{"other token", set("X-Amz-Meta-Fence-Token", "99"), body, "SignatureDoesNotMatch"},
		{"token sent twice", func(r *http.Request) { r.Header.Add("X-Amz-Meta-Fence-Token", "99") }, body, "SignatureDoesNotMatch"},
		{"content type sent twice", func(r *http.Request) { r.Header.Add("Content-Type", "text/html") }, body, "SignatureDoesNotMatch"},
		{"condition dropped", func(r *http.Request) { r.Header.Del("If-None-Match") }, body, "SignatureDoesNotMatch"},
		{"condition changed to If-Match", func(r *http.Request) { r.Header.Del("If-None-Match"); r.Header.Set("If-Match", `"x"`) }, body, "SignatureDoesNotMatch"},
		{"signed metadata dropped", func(r *http.Request) { r.Header.Del("X-Amz-Meta-Owner") }, body, "SignatureDoesNotMatch"},
		{"longer body, its length told", nil, body + "!", "SignatureDoesNotMatch"},
		{"shorter body, its length told", nil, body[:4], "SignatureDoesNotMatch"},
		{"query parameter added", func(r *http.Request) { r.URL.RawQuery += "&x-amz-acl=public-read" }, body, "SignatureDoesNotMatch"},
		{"expiry lengthened", setQuery("X-Amz-Expires", "600"), body, "SignatureDoesNotMatch"},
		{"another key", func(r *http.Request) { r.URL.Path += "-other"; r.URL.RawPath = "" }, body, "SignatureDoesNotMatch"},
		{"unsigned x-amz-meta-* added", set("X-Amz-Meta-Other", "1"), body, "AccessDenied"},
		{"unsigned x-amz-acl added", set("X-Amz-Acl", "public-read"), body, "AccessDenied"},
		{"unsigned x-amz-tagging added", set("X-Amz-Tagging", "a=b"), body, "AccessDenied"},
		{"unsigned x-amz-storage-class added", set("X-Amz-Storage-Class", "GLACIER"), body, "AccessDenied"},
		{"unsigned x-amz-server-side-encryption added", set("X-Amz-Server-Side-Encryption", "AES256"), body, "AccessDenied"},
		{"unsigned x-amz-content-sha256 added", set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD"), body, "AccessDenied"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := api.ObjectPath{Bucket: "ticket-changed", Key: fmt.Sprint("k", i)}
			tk := ticketFor(t, c, api.TicketRequest{Path: p, Token: 3, Size: int64(len(body)), ContentType: "text/plain", Metadata: map[string]string{"owner": "team-a"}})
			if a := useTicket(t, tk, tt.body, tt.edit); a.Status != http.StatusForbidden || a.Code != tt.wantCode {
				t.Fatalf("changed ticket = %v; want 403 %s", a, tt.wantCode)
			}
			if got := readTicketObject(t, p); got.Exists {
				t.Fatalf("read back %+v; want no object", got)
			}
			// The same ticket, unchanged, still lands: the refusal was
			// for the change.
			if a := useTicket(t, tk, body, nil); a.Status != http.StatusOK {
				t.Fatalf("unchanged ticket = %v; want 200", a)
			}
		})
	}
}

// setQuery is an edit of a ticket's request that sets a query parameter.
func setQuery(name, value string) func(*http.Request) {
	return func(r *http.Request) {
		q := r.URL.Query()
		if q.Get(name) == "" {
			panic("setQuery: the ticket has no " + name)
		}
		q.Set(name, value)
		r.URL.RawQuery = q.Encode()
	}
}

// TestTicketUnsignedStandardHeadersLand: a header the ticket did not sign
// and that is not x-amz-* is accepted and kept with the object, on
// versitygw as SigV4 allows on AWS S3: a ticket holder may add
// Cache-Control, Content-Disposition, Content-Encoding, Content-Language
// or Expires. It cannot change the token, the condition, the length, the
// content type or the signed metadata (TestTicketRefusesChangedRequests).
func TestTicketUnsignedStandardHeadersLand(t *testing.T) {
	server.CreateBucket(t, "ticket-unsigned")
	c := newClient(t, server.Endpoint(), 0)
	p := api.ObjectPath{Bucket: "ticket-unsigned", Key: "k"}
	tk := ticketFor(t, c, api.TicketRequest{Path: p, Token: 3, Size: 5, ContentType: "text/plain"})
	if a := useTicket(t, tk, "hello", func(r *http.Request) { r.Header.Set("Cache-Control", "max-age=60") }); a.Status != http.StatusOK {
		t.Fatalf("ticket with an added Cache-Control = %v; want 200 (versitygw keeps it)", a)
	}
	if got := readTicketObject(t, p); got.CacheControl != "max-age=60" || got.Metadata["Fence-Token"] != "3" {
		t.Fatalf("read back %+v; want Cache-Control max-age=60 and Fence-Token 3", got)
	}
}

// TestTicketBodyLength: a client that sends another number of bytes than
// the signed Content-Length says cannot store them. A longer body is cut
// at the length, by HTTP's framing: the object is the signed number of
// bytes, the rest is not part of the request. A shorter body never
// completes the request: versitygw answers 500 InternalError when the
// client closes its side (AWS S3 documents 400 IncompleteBody), and
// stores nothing.
func TestTicketBodyLength(t *testing.T) {
	server.CreateBucket(t, "ticket-length")
	c := newClient(t, server.Endpoint(), 0)
	tests := []struct {
		name     string
		body     string
		want     int
		wantBody string
		exists   bool
	}{
		{"signed length, more bytes", "hello, and more", http.StatusOK, "hello", true},
		{"signed length, fewer bytes, then closed", "hel", http.StatusInternalServerError, "", false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := api.ObjectPath{Bucket: "ticket-length", Key: fmt.Sprint("k", i)}
			tk := ticketFor(t, c, api.TicketRequest{Path: p, Token: 3, Size: 5})
			if a := useTicketRaw(t, tk, 5, tt.body, true); a.Status != tt.want {
				t.Fatalf("ticket with Content-Length 5 and %d bytes = %v; want %d", len(tt.body), a, tt.want)
			}
			if got := readTicketObject(t, p); got.Exists != tt.exists || got.Body != tt.wantBody {
				t.Fatalf("read back %+v; want exists %v, %q", got, tt.exists, tt.wantBody)
			}
		})
	}
}

// TestPartTickets: parts sent on part tickets make an upload that the
// gateway's side completes; a part ticket signs its length and its upload
// and part number like a PUT ticket signs its own.
func TestPartTickets(t *testing.T) {
	ctx := context.Background()
	server.CreateBucket(t, "ticket-parts")
	c := newClient(t, server.Endpoint(), 0)
	p := api.ObjectPath{Bucket: "ticket-parts", Key: "big"}
	id, err := c.CreateUpload(ctx, api.CreateUploadInput{Path: p, Token: 11, ContentType: "application/octet-stream"})
	if err != nil {
		t.Fatal(err)
	}
	first := strings.Repeat("a", api.MinPartSize)
	const last = "the last part"
	partTicket := func(number int32, size int, expires time.Duration) api.Ticket {
		tk, err := c.PresignUploadPart(ctx, api.PartTicketRequest{Path: p, UploadID: id, PartNumber: number, Size: int64(size), Expires: expires})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{"Content-Length": strconv.Itoa(size)}; !maps.Equal(tk.Headers, want) {
			t.Fatalf("part ticket headers %v; want %v", tk.Headers, want)
		}
		return tk
	}

	refused := []struct {
		name     string
		tk       api.Ticket
		body     string
		edit     func(*http.Request)
		wantCode string
	}{
		{"another length", partTicket(2, len(last), 0), last + "!", nil, "SignatureDoesNotMatch"},
		{"another part number", partTicket(2, len(last), 0), last, setQuery("partNumber", "3"), "SignatureDoesNotMatch"},
		{"unsigned x-amz-* header", partTicket(2, len(last), 0), last, func(r *http.Request) { r.Header.Set("X-Amz-Meta-A", "1") }, "AccessDenied"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			if a := useTicket(t, tt.tk, tt.body, tt.edit); a.Status != http.StatusForbidden || a.Code != tt.wantCode {
				t.Fatalf("part = %v; want 403 %s", a, tt.wantCode)
			}
		})
	}
	t.Run("expired", func(t *testing.T) {
		tk, err := s3.WithClock(c, func() time.Time { return time.Now().Add(-time.Minute) }).PresignUploadPart(ctx,
			api.PartTicketRequest{Path: p, UploadID: id, PartNumber: 2, Size: int64(len(last)), Expires: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if a := useTicket(t, tk, last, nil); a.Status != http.StatusForbidden || a.Code != "AccessDenied" {
			t.Fatalf("expired part = %v; want 403 AccessDenied", a)
		}
	})
	t.Run("no such upload", func(t *testing.T) {
		tk, err := c.PresignUploadPart(ctx, api.PartTicketRequest{Path: p, UploadID: "no-such-upload", PartNumber: 1, Size: 1})
		if err != nil {
			t.Fatal(err)
		}
		if a := useTicket(t, tk, "x", nil); a.Status != http.StatusNotFound || a.Code != "NoSuchUpload" {
			t.Fatalf("part of no upload = %v; want 404 NoSuchUpload", a)
		}
	})

	one := useTicket(t, partTicket(1, len(first), 0), first, nil)
	two := useTicket(t, partTicket(2, len(last), 0), last, nil)
	if one.Status != http.StatusOK || two.Status != http.StatusOK || one.ETag == "" || two.ETag == "" {
		t.Fatalf("parts = %v %q, %v %q; want 200 with ETags", one, one.ETag, two, two.ETag)
	}
	parts := []api.Part{{Number: 1, ETag: one.ETag}, {Number: 2, ETag: two.ETag}}
	if _, err := c.CompleteUpload(ctx, api.CompleteUploadInput{Path: p, UploadID: id, Parts: parts, Replaces: api.ObjectVersion{}}); err != nil {
		t.Fatalf("CompleteUpload = %v", err)
	}
	if got := readTicketObject(t, p); got.Body != first+last || got.Metadata["Fence-Token"] != "11" {
		t.Fatalf("read back %d bytes, metadata %v; want %d bytes, Fence-Token 11", len(got.Body), got.Metadata, len(first+last))
	}
}

// TestTicketSignedAheadOfTheStoresClock: versitygw takes a ticket whose
// X-Amz-Date is an hour ahead of its clock, and counts its expiry from
// that date: a gateway whose clock runs ahead of the store's issues
// tickets that live longer than they say. Tickets are only as short as
// the two clocks agree.
func TestTicketSignedAheadOfTheStoresClock(t *testing.T) {
	server.CreateBucket(t, "ticket-ahead")
	c := s3.WithClock(newClient(t, server.Endpoint(), 0), func() time.Time { return time.Now().Add(time.Hour) })
	p := api.ObjectPath{Bucket: "ticket-ahead", Key: "k"}
	tk := ticketFor(t, c, api.TicketRequest{Path: p, Token: 1, Size: 1, Expires: 30 * time.Second})
	if a := useTicket(t, tk, "x", nil); a.Status != http.StatusOK {
		t.Fatalf("ticket signed an hour ahead = %v; want 200 (versitygw takes it)", a)
	}
	if got := readTicketObject(t, p); got.Body != "x" {
		t.Fatalf("read back %+v; want %q", got, "x")
	}
}

// TestTicketRaceHasOneWinner: tickets of 20 writers that all observed the
// same version, used at once, are arbitrated by the store: exactly one
// lands, as with the gateway's own conditional writes
// (TestOneOfManyConditionalWritesWins), and the object is its bytes.
func TestTicketRaceHasOneWinner(t *testing.T) {
	server.CreateBucket(t, "ticket-race")
	c := newClient(t, server.Endpoint(), 0)
	p := api.ObjectPath{Bucket: "ticket-race", Key: "k"}
	for _, observed := range []api.ObjectVersion{{}, {Exists: true}} {
		name := "must not exist"
		if observed.Exists {
			name = "If-Match"
			observed = existing(t, c, "base")(p)
		}
		t.Run(name, func(t *testing.T) {
			const n = 20
			tickets := make([]api.Ticket, n)
			for i := range tickets {
				tickets[i] = ticketFor(t, c, api.TicketRequest{Path: p, Replaces: observed, Token: api.Token(10 + i), Size: int64(len("racer 00"))})
			}
			answers := make(chan storeAnswer, n)
			for i, tk := range tickets {
				go func() {
					a, err := sendTicket(tk, fmt.Sprintf("racer %02d", i), nil)
					if err != nil {
						a.Code = err.Error()
					}
					answers <- a
				}()
			}
			winners := 0
			for range n {
				switch a := <-answers; a.Status {
				case http.StatusOK:
					winners++
				case http.StatusPreconditionFailed, http.StatusConflict:
				default:
					t.Errorf("racer = %v; want 200, 412 or 409", a)
				}
			}
			if winners != 1 {
				t.Fatalf("%d of %d tickets landed; want exactly 1", winners, n)
			}
			got := readTicketObject(t, p)
			racer, err := strconv.Atoi(strings.TrimPrefix(got.Body, "racer "))
			if err != nil || got.Metadata["Fence-Token"] != strconv.Itoa(10+racer) {
				t.Fatalf("read back %q with token %s; want one racer's bytes with its own token", got.Body, got.Metadata["Fence-Token"])
			}
		})
		if !observed.Exists {
			deleteObject(t, c, p)
		}
	}
}

// TestTicketConditionHoldsAtTheEnd: the condition holds for the object as
// it is when the ticket's body has arrived, not when its headers did: a
// newer holder's write that lands while a ticket's bytes are on their way
// makes the ticket's write fail (412), and the newer bytes stay. A client
// that stalls mid-upload is fenced like one that stalls before it.
func TestTicketConditionHoldsAtTheEnd(t *testing.T) {
	server.CreateBucket(t, "ticket-inflight")
	c := newClient(t, server.Endpoint(), 0)
	const size = 4 << 20
	tests := []struct {
		name  string
		setup func(api.ObjectPath) api.ObjectVersion
	}{
		{"must not exist", noObject},
		{"If-Match", existing(t, c, "old bytes")},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := api.ObjectPath{Bucket: "ticket-inflight", Key: fmt.Sprint("k", i)}
			tk := ticketFor(t, c, api.TicketRequest{Path: p, Replaces: tt.setup(p), Token: 8, Size: size, Expires: time.Minute})
			body, w := io.Pipe()
			answer := make(chan storeAnswer, 1)
			go func() {
				a, err := sendTicket(tk, "", func(r *http.Request) { r.Body, r.ContentLength = body, size })
				if err != nil {
					a.Code = err.Error()
				}
				answer <- a
			}()
			half := strings.Repeat("s", size/2)
			if _, err := io.WriteString(w, half); err != nil {
				t.Fatal(err)
			}
			mustPut(t, c, p, "newer bytes", 9, observe(t, c, p))
			if _, err := io.WriteString(w, half); err != nil {
				t.Fatal(err)
			}
			w.Close()
			if a := <-answer; a.Status != http.StatusPreconditionFailed {
				t.Fatalf("ticket whose body ended after a newer write = %v; want 412", a)
			}
			if got := readTicketObject(t, p); got.Body != "newer bytes" || got.Metadata["Fence-Token"] != "9" {
				t.Fatalf("read back %.20q with token %s; want the newer bytes, token 9", got.Body, got.Metadata["Fence-Token"])
			}
		})
	}
}
