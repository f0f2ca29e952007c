package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"fencegate/api"
	"fencegate/fence"
	"fencegate/gateway"
)

// A multipart ticket's upload completed and aborted through the REST API
// (POST and DELETE /v1/uploads), against real etcd and versitygw: the
// parts go straight to the store on their tickets, the completion goes
// through the gateway and its fence check, and what landed is read back
// with minio-go.

// ticketPartSize is the part size of the multipart tickets of these
// tests, and ticketBody a body of two parts of it, the second small.
const ticketPartSize = api.MinPartSize

var ticketBody = bytes.Repeat([]byte("0123456789abcdef"), (ticketPartSize+1024)/16)

// uploadURL is the REST route of key's multipart upload.
func (e *env) uploadURL(key string) string { return e.url + "/v1/uploads/" + e.bucket + "/" + key }

// complete sends a REST completion of key with token (zero: none) and
// the JSON body given.
func (e *env) complete(tb testing.TB, key string, token api.Token, body []byte) result {
	tb.Helper()
	var tokens []string
	if token != 0 {
		tokens = []string{token.String()}
	}
	return do(tb, http.MethodPost, e.uploadURL(key), tokens, body)
}

// abort sends a REST abort of key's upload uploadID with token (zero:
// none).
func (e *env) abort(tb testing.TB, key string, token api.Token, uploadID string) result {
	tb.Helper()
	var tokens []string
	if token != 0 {
		tokens = []string{token.String()}
	}
	return do(tb, http.MethodDelete, e.uploadURL(key)+"?upload_id="+url.QueryEscape(uploadID), tokens, nil)
}

// completion is the JSON body of a completion of uploadID from parts.
func completion(tb testing.TB, uploadID string, parts []api.Part) []byte {
	tb.Helper()
	type part struct {
		Number int32  `json:"part_number"`
		ETag   string `json:"etag"`
	}
	body := struct {
		UploadID string `json:"upload_id"`
		Parts    []part `json:"parts"`
	}{UploadID: uploadID, Parts: []part{}}
	for _, p := range parts {
		body.Parts = append(body.Parts, part{p.Number, p.ETag})
	}
	b, err := json.Marshal(body)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// multipartTicket asks for a multipart ticket to write ticketBody to key
// with token, and uploads its parts on their tickets.
func (e *env) multipartTicket(tb testing.TB, key string, token api.Token) (fence.IssuedTicket, []api.Part) {
	tb.Helper()
	tk := e.issued(tb, key, token, fmt.Sprintf(`{"size":%d,"part_size":%d}`, len(ticketBody), ticketPartSize))
	if len(tk.Parts) != 2 || tk.UploadID == "" {
		tb.Fatalf("multipart ticket = %d parts, upload %q; want 2 parts and an upload", len(tk.Parts), tk.UploadID)
	}
	return tk, partsOf(tb, tk, ticketBody, ticketPartSize)
}

// written decodes a completion's answer, a write's result.
func written(tb testing.TB, r result) fence.WriteResult {
	tb.Helper()
	var res fence.WriteResult
	if err := json.Unmarshal(r.body, &res); err != nil {
		tb.Fatalf("completion answer %s: %v", r, err)
	}
	return res
}

// wantNoUpload fails unless r is the 404 of a request that names no
// upload of its key (not that of a route that does not exist).
func wantNoUpload(tb testing.TB, r result) {
	tb.Helper()
	wantProblem(tb, r, http.StatusNotFound, "not-found")
	if !strings.Contains(r.problem.Detail, "no such upload") {
		tb.Fatalf("got %s; want a 404 that names no upload", r)
	}
}

// TestTicketCompletedOverREST: a multipart ticket's parts go straight to
// the store, and the REST completion makes them the object, with every
// part and the ticket's token: 201 when it created the object, 200 when
// it replaced one, as a PUT. A completion sent again is answered 200
// with the same ETag, and no upload is left.
func TestTicketCompletedOverREST(t *testing.T) {
	for _, existing := range []bool{false, true} {
		t.Run(fmt.Sprintf("existing=%v", existing), func(t *testing.T) {
			e, _ := newMultipartEnv(t, gateway.Config{})
			want := http.StatusCreated
			if existing {
				want = http.StatusOK
				if r := e.put(t, "big", 4, "old"); r.status != http.StatusCreated {
					t.Fatalf("PUT = %s", r)
				}
			}
			tk, parts := e.multipartTicket(t, "big", 5)
			r := e.complete(t, "big", 5, completion(t, tk.UploadID, parts))
			res := written(t, r)
			if r.status != want || res.Token != 5 || res.ETag == "" || r.header.Get("ETag") != res.ETag || r.header.Get(api.HeaderFenceToken) != "5" {
				t.Fatalf("REST completion = %s; want %d with token 5 and the ETag", r, want)
			}
			if !strings.HasSuffix(strings.Trim(res.ETag, `"`), "-2") {
				t.Errorf("ETag %s; want a two-part upload's", res.ETag)
			}
			e.wantStored(t, "big", string(ticketBody), 5)
			if left := e.uploadsLeft(t); len(left) != 0 {
				t.Errorf("uploads left after the completion: %v; want none", left)
			}
			again := e.complete(t, "big", 5, completion(t, tk.UploadID, parts))
			if again.status != http.StatusOK || written(t, again).ETag != res.ETag {
				t.Errorf("the same completion again = %s; want 200 with ETag %s", again, res.ETag)
			}
		})
	}
}

// TestTicketCompletionFenced: a newer holder's fence check between the
// ticket and its completion, with a write or without one (a ticket it
// never used), makes the completion stale: 409, the object is not
// replaced, and the upload is aborted.
func TestTicketCompletionFenced(t *testing.T) {
	tests := []struct {
		name  string
		newer func(t *testing.T, e *env)
		// stored is what the object holds after the newer holder (empty:
		// no object).
		stored string
	}{
		{"newer write", func(t *testing.T, e *env) {
			if r := e.put(t, "big", 6, "newer"); r.status/100 != 2 {
				t.Fatalf("newer holder's PUT = %s", r)
			}
		}, "newer"},
		{"newer fence check", func(t *testing.T, e *env) {
			e.issued(t, "big", 6, `{"size":5}`) // raises the mark, writes nothing
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := newMultipartEnv(t, gateway.Config{})
			tk, parts := e.multipartTicket(t, "big", 5)
			tt.newer(t, e)
			wantProblem(t, e.complete(t, "big", 5, completion(t, tk.UploadID, parts)), http.StatusConflict, "stale-token")
			if tt.stored != "" {
				e.wantStored(t, "big", tt.stored, 6)
			} else if _, _, ok := e.stored(t, "big"); ok {
				t.Fatal("a stale completion stored the object")
			}
			if left := e.uploadsLeft(t); len(left) != 0 {
				t.Errorf("uploads left after a stale completion: %v; want none (aborted)", left)
			}
		})
	}
}

// TestTicketCompletionRefused: a completion that names no upload of the
// key, sends no token or another one, or whose body is not a completion,
// is refused with the problem that says so, and the upload stays, to be
// completed after.
func TestTicketCompletionRefused(t *testing.T) {
	e, _ := newMultipartEnv(t, gateway.Config{})
	if r := e.put(t, "other", 5, "other"); r.status != http.StatusCreated {
		t.Fatalf("PUT = %s", r)
	}
	tk, parts := e.multipartTicket(t, "big", 5)
	otherTk, _ := e.multipartTicket(t, "other", 5)
	one := func(number int32, etag string) string {
		return fmt.Sprintf(`{"upload_id":%q,"parts":[{"part_number":%d,"etag":%q}]}`, tk.UploadID, number, etag)
	}
	storeID, _, _ := api.SplitCapability(tk.UploadID)
	tests := []struct {
		name   string
		key    string
		token  api.Token
		body   string
		status int
		slug   string // empty: wantNoUpload
	}{
		{"unknown upload id", "big", 5, string(completion(t, "no-such-upload", parts)), 404, ""},
		{"wrong secret", "big", 5, string(completion(t, storeID+".wrong", parts)), 404, ""},
		{"another key's upload", "big", 5, string(completion(t, otherTk.UploadID, parts)), 404, ""},
		{"upload of another key", "other", 5, string(completion(t, tk.UploadID, parts)), 404, ""},
		{"no token", "big", 0, string(completion(t, tk.UploadID, parts)), 428, "missing-token"},
		{"stale token", "big", 4, string(completion(t, tk.UploadID, parts)), 409, "stale-token"},
		{"another token", "big", 7, string(completion(t, tk.UploadID, parts)), 400, "invalid-request"},
		{"not JSON", "big", 5, "upload_id=x", 400, "invalid-request"},
		{"two objects", "big", 5, one(1, parts[0].ETag) + "{}", 400, "invalid-request"},
		{"unknown member", "big", 5, `{"upload_id":"x","parts":[{"part_number":1,"etag":"e"}],"checksum":"x"}`, 400, "invalid-request"},
		{"unknown part member", "big", 5, `{"upload_id":"x","parts":[{"part_number":1,"etag":"e","size":5}]}`, 400, "invalid-request"},
		{"no upload id", "big", 5, `{"parts":[{"part_number":1,"etag":"e"}]}`, 400, "invalid-request"},
		{"no parts", "big", 5, string(completion(t, tk.UploadID, nil)), 400, "invalid-request"},
		{"part number 0", "big", 5, one(0, parts[0].ETag), 400, "invalid-request"},
		{"part number 10001", "big", 5, one(10001, parts[0].ETag), 400, "invalid-request"},
		{"no etag", "big", 5, one(1, ""), 400, "invalid-request"},
		{"parts out of order", "big", 5, string(completion(t, tk.UploadID, []api.Part{parts[1], parts[0]})), 400, "invalid-request"},
		{"a part twice", "big", 5, string(completion(t, tk.UploadID, []api.Part{parts[0], parts[0]})), 400, "invalid-request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := e.complete(t, tt.key, tt.token, []byte(tt.body)); tt.slug == "" {
				wantNoUpload(t, r)
			} else {
				wantProblem(t, r, tt.status, tt.slug)
			}
			e.wantStored(t, "other", "other", 5)
			if _, _, ok := e.stored(t, "big"); ok {
				t.Fatal("a refused completion stored the object")
			}
		})
	}
	r := e.complete(t, "big", 5, completion(t, tk.UploadID, parts))
	if r.status != http.StatusCreated {
		t.Fatalf("completion after the refusals = %s; want 201", r)
	}
	e.wantStored(t, "big", string(ticketBody), 5)
}

// TestTicketAbortedOverREST: the REST abort of a multipart ticket's
// upload removes it from the store (204), after which a completion finds
// no upload (404); an abort without a token, or of no upload of the key,
// is refused and removes nothing.
func TestTicketAbortedOverREST(t *testing.T) {
	e, _ := newMultipartEnv(t, gateway.Config{})
	tk, parts := e.multipartTicket(t, "big", 5)
	wantProblem(t, e.abort(t, "big", 0, tk.UploadID), http.StatusPreconditionRequired, "missing-token")
	wantNoUpload(t, e.abort(t, "big", 5, "no-such-upload"))
	wantNoUpload(t, e.abort(t, "other", 5, tk.UploadID))
	wantProblem(t, e.abort(t, "big", 5, ""), http.StatusBadRequest, "invalid-request")
	if left := e.uploadsLeft(t); len(left) != 1 {
		t.Fatalf("uploads after refused aborts: %v; want the ticket's", left)
	}
	if r := e.abort(t, "big", 5, tk.UploadID); r.status != http.StatusNoContent || r.header.Get(api.HeaderFenceToken) != "5" {
		t.Fatalf("REST abort = %s; want 204 with X-Fence-Token 5", r)
	}
	if left := e.uploadsLeft(t); len(left) != 0 {
		t.Fatalf("uploads after the abort: %v; want none", left)
	}
	wantNoUpload(t, e.complete(t, "big", 5, completion(t, tk.UploadID, parts)))
	if _, _, ok := e.stored(t, "big"); ok {
		t.Fatal("an aborted upload's completion stored the object")
	}
}

// TestTicketAtMostParts: a multipart ticket of api.MaxParts parts, the
// most an upload has, is issued whole, and its answer is measured
// (docs/tickets.md gives the figure); a completion naming every one of
// those parts fits the route's body limit (it gets past it to the
// upload's lookup: 404 for an id that names none), and a larger body is
// 413.
func TestTicketAtMostParts(t *testing.T) {
	e, _ := newMultipartEnv(t, gateway.Config{MaxMultipartBodyBytes: api.MaxParts * ticketPartSize})
	r := e.ticket(t, "big", 5, fmt.Sprintf(`{"size":%d,"part_size":%d}`, api.MaxParts*ticketPartSize, ticketPartSize))
	var tk fence.IssuedTicket
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &tk) != nil || len(tk.Parts) != api.MaxParts {
		t.Fatalf("ticket of %d parts = %d, %d parts; want 201 and every part", api.MaxParts, r.status, len(tk.Parts))
	}
	t.Logf("a ticket of %d parts: %d bytes (%d bytes a part); bucket %q (%d bytes), key %q",
		api.MaxParts, len(r.body), len(r.body)/api.MaxParts, e.bucket, len(e.bucket), "big")
	if len(r.body) > maxTicketAnswerBytes {
		t.Errorf("a ticket of %d parts is %d bytes; docs/tickets.md says at most %d for short names", api.MaxParts, len(r.body), maxTicketAnswerBytes)
	}

	parts := make([]api.Part, api.MaxParts)
	for i := range parts {
		// The longest ETag a part has: a quoted MD5, escaped in JSON.
		parts[i] = api.Part{Number: int32(i + 1), ETag: `"` + strings.Repeat("f", 32) + `"`}
	}
	body := completion(t, "no-such-upload", parts)
	t.Logf("a completion of %d parts: %d bytes", api.MaxParts, len(body))
	wantNoUpload(t, e.complete(t, "big", 5, body))
	over := append(bytes.Repeat([]byte(" "), maxCompletionBytes+1-len(body)), body...)
	wantProblem(t, e.complete(t, "big", 5, over), http.StatusRequestEntityTooLarge, "body-too-large")

	if r := e.abort(t, "big", 5, tk.UploadID); r.status != http.StatusNoContent {
		t.Fatalf("abort of the %d-part upload = %s; want 204", api.MaxParts, r)
	}
}

// maxCompletionBytes is the REST completion's body limit (package rest),
// and maxTicketAnswerBytes the size docs/tickets.md gives for a ticket of
// api.MaxParts parts with short names.
const (
	maxCompletionBytes   = 2 << 20
	maxTicketAnswerBytes = 6 << 20
)

// partTickets asks for tickets of part_count parts of key's upload
// uploadID from first_part, with token (zero: none).
func (e *env) partTickets(tb testing.TB, key string, token api.Token, uploadID string, first, count int) result {
	tb.Helper()
	return e.ticket(tb, key, token, fmt.Sprintf(`{"upload_id":%q,"first_part":%d,"part_count":%d}`, uploadID, first, count))
}

// TestTicketPartsRenewed: once a multipart ticket's part tickets have
// expired, its creator asks for fresh ones of the parts it names (the
// same form, from the same presigner), the parts land on them, and the
// completion makes the object. A first answer asked for one part holds
// one.
func TestTicketPartsRenewed(t *testing.T) {
	e, _ := newMultipartEnv(t, gateway.Config{TicketExpiry: time.Second})
	tk := e.issued(t, "big", 5, fmt.Sprintf(`{"size":%d,"part_size":%d,"part_count":1}`, len(ticketBody), ticketPartSize))
	if len(tk.Parts) != 1 || tk.FirstPart != 1 || tk.UploadID == "" {
		t.Fatalf("multipart ticket of part_count 1 = %d parts from %d, upload %q; want part 1 and an upload", len(tk.Parts), tk.FirstPart, tk.UploadID)
	}
	// Past the first ticket's expiry, which the store enforces on parts
	// (TestPartTickets in backends/s3; sent here, the store's early 403
	// would reset the test proxy's connection mid-body).
	time.Sleep(time.Until(tk.ExpiresAt) + 1500*time.Millisecond)

	r := e.partTickets(t, "big", 5, tk.UploadID, 1, 2)
	if r.status != http.StatusCreated || r.header.Get(api.HeaderFenceToken) != "5" {
		t.Fatalf("part tickets = %s; want 201 with token 5", r)
	}
	var fresh fence.IssuedTicket
	if err := json.Unmarshal(r.body, &fresh); err != nil {
		t.Fatal(err)
	}
	if len(fresh.Parts) != 2 || fresh.FirstPart != 1 || fresh.UploadID != tk.UploadID || fresh.Token != 5 || fresh.Resource != tk.Resource ||
		!fresh.ExpiresAt.After(tk.ExpiresAt) || fresh.Parts[1].Headers["Content-Length"] != "1024" {
		t.Fatalf("part tickets = %+v; want parts 1 and 2 (1024 bytes), the same upload and token, expiring later", fresh)
	}
	parts := partsOf(t, fresh, ticketBody, ticketPartSize)

	// The second part again, alone: its ticket names part 2.
	r = e.partTickets(t, "big", 5, tk.UploadID, 2, 1)
	var second fence.IssuedTicket
	if err := json.Unmarshal(r.body, &second); err != nil || r.status != http.StatusCreated || len(second.Parts) != 1 || second.FirstPart != 2 {
		t.Fatalf("ticket of part 2 = %s; want 201 with part 2", r)
	}
	resp, err := http.DefaultClient.Do(ticketRequest(t, second.Parts[0], ticketBody[ticketPartSize:]))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("part 2 on its ticket = %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	parts[1].ETag = resp.Header.Get("ETag")

	r = e.complete(t, "big", 5, completion(t, tk.UploadID, parts))
	if r.status != http.StatusCreated || written(t, r).Token != 5 {
		t.Fatalf("completion = %s; want 201 with token 5", r)
	}
	e.wantStored(t, "big", string(ticketBody), 5)
}

// TestTicketPartsRefused: part tickets are refused without a token (428),
// for an upload id that names no upload of the key (404), for parts
// outside the upload's or a malformed body (400), and, once a newer
// holder's fence check made the upload's token stale, 409 with no
// tickets, and the upload is aborted.
func TestTicketPartsRefused(t *testing.T) {
	e, gw := newMultipartEnv(t, gateway.Config{})
	tk := e.issued(t, "big", 5, fmt.Sprintf(`{"size":%d,"part_size":%d}`, len(ticketBody), ticketPartSize))
	other := e.issued(t, "other", 5, fmt.Sprintf(`{"size":%d,"part_size":%d}`, len(ticketBody), ticketPartSize))
	storeID, _, _ := api.SplitCapability(tk.UploadID)
	// An upload of the S3 API's kind, no ticket's: its parts' sizes are unknown.
	plain, err := gw.Engine().CreateUpload(context.Background(), api.ObjectPath{Store: api.StoreS3, Bucket: e.bucket, Key: "plain"}, 5, "", api.ObjectMetadata{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		token  api.Token
		body   string
		status int
		slug   string
	}{
		{"no token", 0, fmt.Sprintf(`{"upload_id":%q,"first_part":1,"part_count":1}`, tk.UploadID), http.StatusPreconditionRequired, "missing-token"},
		{"no such upload", 5, `{"upload_id":"no-such-upload","first_part":1,"part_count":1}`, http.StatusNotFound, "not-found"},
		{"another key's upload", 5, fmt.Sprintf(`{"upload_id":%q,"first_part":1,"part_count":1}`, other.UploadID), http.StatusNotFound, "not-found"},
		{"the store's id with another token", 7, fmt.Sprintf(`{"upload_id":%q,"first_part":1,"part_count":1}`, storeID), http.StatusBadRequest, "invalid-request"},
		{"past the last part", 5, fmt.Sprintf(`{"upload_id":%q,"first_part":2,"part_count":2}`, tk.UploadID), http.StatusBadRequest, "invalid-request"},
		{"after the last part", 5, fmt.Sprintf(`{"upload_id":%q,"first_part":3,"part_count":1}`, tk.UploadID), http.StatusBadRequest, "invalid-request"},
		{"part 0", 5, fmt.Sprintf(`{"upload_id":%q,"first_part":0,"part_count":1}`, tk.UploadID), http.StatusBadRequest, "invalid-request"},
		{"no count", 5, fmt.Sprintf(`{"upload_id":%q,"first_part":1}`, tk.UploadID), http.StatusBadRequest, "invalid-request"},
		{"too many", 5, fmt.Sprintf(`{"upload_id":%q,"first_part":1,"part_count":%d}`, tk.UploadID, api.MaxPartTickets+1), http.StatusBadRequest, "invalid-request"},
		{"with a size", 5, fmt.Sprintf(`{"upload_id":%q,"first_part":1,"part_count":1,"size":5}`, tk.UploadID), http.StatusBadRequest, "invalid-request"},
		{"an upload no ticket created", 5, fmt.Sprintf(`{"upload_id":%q,"first_part":1,"part_count":1}`, plain.Capability()), http.StatusBadRequest, "invalid-request"},
		{"unknown member", 5, fmt.Sprintf(`{"upload_id":%q,"first_part":1,"part_count":1,"last":2}`, tk.UploadID), http.StatusBadRequest, "invalid-request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "big"
			if strings.HasPrefix(tt.name, "an upload no ticket") {
				key = "plain"
			}
			r := e.ticket(t, key, tt.token, tt.body)
			wantProblem(t, r, tt.status, tt.slug)
			if tt.status == http.StatusNotFound {
				wantNoUpload(t, r)
			}
		})
	}

	if r := e.put(t, "big", 6, "newer"); r.status != http.StatusCreated {
		t.Fatalf("newer holder's PUT = %s", r)
	}
	r := e.partTickets(t, "big", 5, tk.UploadID, 1, 2)
	wantProblem(t, r, http.StatusConflict, "stale-token")
	if bytes.Contains(r.body, []byte("X-Amz-Signature")) {
		t.Fatalf("stale part tickets = %s; want no ticket", r)
	}
	e.wantStored(t, "big", "newer", 6)
	for _, left := range e.uploadsLeft(t) {
		if strings.HasPrefix(left, "big ") {
			t.Fatalf("uploads left after a stale part ticket request: %v; want none of big", left)
		}
	}
}

// TestTicketAnswerInBudget: a multipart ticket's answer is built in
// memory (a presigned URL a part, 5.5 MB of JSON for 10,000 parts with
// short names), so the memory it takes comes from the budget of buffered
// bodies, reserved before anything is raised or created: a ticket whose
// answer could never fit the budget is refused 400, naming part_count;
// one that does not fit what other requests leave is 503 gateway-busy;
// neither raises the mark or leaves an upload. Once the budget is free
// the same ticket is issued, and its memory goes back after the answer.
// Outside the budget, the 128 such tickets a client may ask for at once
// would take gigabytes that no limit counted.
func TestTicketAnswerInBudget(t *testing.T) {
	const (
		budget = 8 << 20
		buffer = 512 << 10
	)
	e, _ := newMultipartEnv(t, gateway.Config{BufferBytes: buffer, BufferBudgetBytes: budget, MaxMultipartBodyBytes: api.MaxParts * ticketPartSize})

	every := fmt.Sprintf(`{"size":%d,"part_size":%d}`, api.MaxParts*ticketPartSize, ticketPartSize)
	r := e.ticket(t, "big", 5, every)
	wantProblem(t, r, http.StatusBadRequest, "invalid-request")
	if !strings.Contains(string(r.body), "part_count") {
		t.Errorf("refusal of a ticket too large for the budget = %s; want it to name part_count", r)
	}

	// Slow PUTs hold 7 MiB of the 8: a ticket of 1,000 parts (about 2 MB
	// to answer) does not fit what is left.
	var slow []*slowPut
	for i := range 14 {
		slow = append(slow, e.startSlowPut(t, fmt.Sprintf("slow-%d", i), buffer, buffer-1024))
	}
	e.waitForBuffered(t, 14*(buffer-1024))
	batch := fmt.Sprintf(`{"size":%d,"part_size":%d,"part_count":1000}`, api.MaxParts*ticketPartSize, ticketPartSize)
	wantProblem(t, e.ticket(t, "big", 5, batch), http.StatusServiceUnavailable, "gateway-busy")

	if m := e.mark(t, "big"); m != 0 {
		t.Errorf("mark of big = %d after two refused tickets; want 0 (never raised)", m)
	}
	if left := e.uploadsLeft(t); len(left) != 0 {
		t.Errorf("uploads left after two refused tickets: %v", left)
	}

	for _, p := range slow {
		p.conn.Close()
	}
	e.waitForReleased(t)
	r = e.ticket(t, "big", 5, batch)
	var tk fence.IssuedTicket
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &tk) != nil || len(tk.Parts) != 1000 {
		t.Fatalf("ticket of 1,000 parts once the budget is free = %s; want 201 and 1,000 parts", r)
	}
	e.waitForReleased(t)
	if r := e.abort(t, "big", 5, tk.UploadID); r.status != http.StatusNoContent {
		t.Fatalf("abort = %s; want 204", r)
	}
}
