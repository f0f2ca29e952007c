package robustness

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"fencegate/api"
)

// S3Fault is what the S3 proxy does to object writes (PUTs of an object).
// Each write draws at most one of these, by the rates; the rates add up to
// at most 1. The zero S3Fault forwards every write untouched.
type S3Fault struct {
	// ErrorBefore answers 503 SlowDown without forwarding: nothing is
	// written.
	ErrorBefore float64
	// ErrorAfter forwards the write and, once S3 has committed it, answers
	// 500 InternalError instead of S3's answer.
	ErrorAfter float64
	// DropAfter forwards the write and, once S3 has committed it, closes
	// the connection without an answer.
	DropAfter float64
}

// StoreWrite is one object write (or delete) that reached a store's proxy
// (the S3 proxy or the GCS proxy), in the order the store committed them:
// the proxy serializes writes to the same key, so the order of the record
// is the store's order for each key.
type StoreWrite struct {
	// Seq numbers every write the proxy saw, from 1.
	Seq int64
	// Gateway is the gateway whose link the write came through.
	Gateway string
	// Key is "bucket/key".
	Key string
	// Token is the write's fence-token metadata (zero if none or bad).
	Token api.Token
	// Deleted says it was a DELETE of the object: it carries no token
	// and names no operation (Token zero, Op "").
	Deleted bool
	// Op is the workload operation that wrote the body ("" if unknown):
	// the op parameter of its Content-Type, else the op its body names
	// (opOf).
	Op string
	// Condition is the write's precondition as sent: on S3
	// `If-Match: "etag"`, `If-None-Match: *`; on GCS
	// `ifGenerationMatch=N` (0: the object does not exist); "" for none.
	Condition string
	// Forwarded says the write was sent to S3; Status is S3's answer.
	Forwarded bool
	Status    int
	// Committed says S3 answered 2xx: the write is a version.
	Committed bool
	// ETag is the new version's, when committed: S3's ETag, or on GCS
	// the generation as the gateway names it (a quoted decimal).
	ETag string
	// BodyETag is the quoted MD5 of the write's bytes (S3's ETag of a
	// single-part body), on either store: what tells, on GCS, that an
	// object went back to bytes it had.
	BodyETag string
	// Fault is the fault injected on the write, or "".
	Fault string
	// Ticket says the write came on a ticket: a presigned PUT (SigV4 in
	// its query) that a client sent straight to the store, through the
	// link of the gateway that issued the ticket (Gateway), not a
	// gateway's own write.
	Ticket bool
	// At is when the proxy received the write, before it forwarded it;
	// Done when it had S3's answer (zero if it never forwarded it). A
	// committed write changed the object in between.
	At, Done time.Time
}

// via says how w reached the store: "via gateway-1", or "on a ticket of
// gateway-1".
func (w StoreWrite) via() string {
	if w.Ticket {
		return "on a ticket of " + w.Gateway
	}
	return "via " + w.Gateway
}

// StoreProxy is an HTTP proxy in front of a store (versitygw, or
// fake-gcs-server), with one listener per gateway. It records every object
// write (the per-object version history the checkers read), and injects
// S3Fault into writes (on GCS, the same faults with GCS's error bodies).
// NewS3Proxy and NewGCSProxy make one for each store.
type StoreProxy struct {
	upstream  string // http://host:port of the store
	transport *http.Transport
	servers   []*http.Server
	listeners map[string]net.Listener
	wg        sync.WaitGroup

	mu     sync.Mutex
	fault  S3Fault
	rnd    *rand.Rand
	seq    int64
	writes []StoreWrite
	keys   map[string]*sync.Mutex
	// faults counts the injected faults by name.
	faults map[string]int
	// uploads are the multipart uploads S3 created, by S3's upload id:
	// the token and op their create named, for the record of their
	// completions.
	uploads map[string]upload
}

// upload is what the create of a multipart upload named: the token of its
// x-amz-meta-fence-token and the op of its Content-Type.
type upload struct {
	token api.Token
	op    string
}

// NewS3Proxy starts one listener on 127.0.0.1 for each gateway name, all
// forwarding to upstream, an S3 server. Close it.
func NewS3Proxy(upstream string, gateways []string, seed uint64) (*StoreProxy, error) {
	return newStoreProxy(upstream, gateways, seed, (*StoreProxy).handler)
}

// newStoreProxy starts one listener on 127.0.0.1 for each gateway name,
// each serving handler(p, gateway) in front of upstream.
func newStoreProxy(upstream string, gateways []string, seed uint64, handler func(p *StoreProxy, gateway string) http.Handler) (*StoreProxy, error) {
	p := &StoreProxy{
		upstream:  strings.TrimRight(upstream, "/"),
		transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second, ResponseHeaderTimeout: 30 * time.Second},
		listeners: make(map[string]net.Listener),
		rnd:       rand.New(rand.NewPCG(seed, 0x5eed)),
		keys:      make(map[string]*sync.Mutex),
		faults:    make(map[string]int),
		uploads:   make(map[string]upload),
	}
	for _, gw := range gateways {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("s3 proxy: %w", err)
		}
		p.listeners[gw] = ln
		srv := &http.Server{Handler: handler(p, gw), ReadHeaderTimeout: 10 * time.Second}
		p.servers = append(p.servers, srv)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			_ = srv.Serve(ln)
		}()
	}
	return p, nil
}

// Addr returns the host:port of gateway's listener.
func (p *StoreProxy) Addr(gateway string) string { return p.listeners[gateway].Addr().String() }

// SetFault puts f in force for the writes that arrive from now on.
func (p *StoreProxy) SetFault(f S3Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = f
}

// Writes returns the writes recorded so far whose key starts with prefix.
func (p *StoreProxy) Writes(prefix string) []StoreWrite {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []StoreWrite
	for _, w := range p.writes {
		if strings.HasPrefix(w.Key, prefix) {
			out = append(out, w)
		}
	}
	return out
}

// InjectedFaults returns how many writes got each S3 fault.
func (p *StoreProxy) InjectedFaults() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.faults))
	for k, v := range p.faults {
		out[k] = v
	}
	return out
}

// Close stops the listeners and waits for requests in flight.
func (p *StoreProxy) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range p.servers {
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
	}
	for _, ln := range p.listeners {
		_ = ln.Close()
	}
	p.wg.Wait()
	p.transport.CloseIdleConnections()
}

// keyLock returns the mutex that serializes writes to key.
func (p *StoreProxy) keyLock(key string) *sync.Mutex {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.keys[key]
	if !ok {
		m = new(sync.Mutex)
		p.keys[key] = m
	}
	return m
}

// drawFault picks the fault for one write.
func (p *StoreProxy) drawFault() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	x := p.rnd.Float64()
	switch f := p.fault; {
	case x < f.ErrorBefore:
		return "s3-error-before"
	case x < f.ErrorBefore+f.ErrorAfter:
		return "s3-error-after"
	case x < f.ErrorBefore+f.ErrorAfter+f.DropAfter:
		return "s3-drop-after"
	}
	return ""
}

// record appends w, numbered.
func (p *StoreProxy) record(w StoreWrite) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	w.Seq = p.seq
	p.writes = append(p.writes, w)
	if w.Fault != "" {
		p.faults[w.Fault]++
	}
}

// objectKey returns "bucket/key" of a path-style object request, or "".
func objectKey(r *http.Request) string {
	path := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, ok := strings.Cut(path, "/")
	if !ok || bucket == "" || key == "" {
		return ""
	}
	return bucket + "/" + key
}

// isObjectWrite reports whether r writes a whole object: a PUT of an
// object that is not a copy, a part or a sub-resource (?acl, ?tagging...),
// by a gateway or on a ticket (presigned).
func isObjectWrite(r *http.Request) bool {
	if r.Method != http.MethodPut || objectKey(r) == "" || r.Header.Get("X-Amz-Copy-Source") != "" {
		return false
	}
	for name := range r.URL.Query() {
		// The AWS SDK adds x-id=PutObject; a presigned request has its
		// signature in X-Amz-* parameters.
		if name != "x-id" && !strings.HasPrefix(name, "X-Amz-") {
			return false
		}
	}
	return true
}

// presigned reports whether r carries its SigV4 signature in its query: a
// ticket's request, sent by a client straight to the store.
func presigned(r *http.Request) bool { return r.URL.Query().Has("X-Amz-Signature") }

func (p *StoreProxy) handler(gateway string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isObjectDelete(r) {
			rec := StoreWrite{Gateway: gateway, Key: objectKey(r), Deleted: true, Condition: condition(r.Header), At: time.Now()}
			p.forwardRecorded(w, r, rec, nil, s3Dialect)
			return
		}
		switch {
		case isUploadCreate(r):
			p.forwardCreate(w, r)
			return
		case isUploadComplete(r):
			p.forwardComplete(w, r, gateway)
			return
		case !isObjectWrite(r):
			p.forward(w, r, nil)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			http.Error(w, "s3 proxy: reading body: "+err.Error(), http.StatusBadRequest)
			return
		}
		rec := StoreWrite{
			Gateway:   gateway,
			Key:       objectKey(r),
			Token:     metadataToken(r.Header),
			Op:        opOf(body, r.Header.Get("Content-Type")),
			BodyETag:  bodyETag(body),
			Condition: condition(r.Header),
			Fault:     p.drawFault(),
			Ticket:    presigned(r),
			At:        time.Now(),
		}
		p.forwardRecorded(w, r, rec, body, s3Dialect)
	})
}

// s3Dialect answers as S3 does, and names a committed version by its
// ETag.
var s3Dialect = storeDialect{
	name: "s3",
	fail: func(w http.ResponseWriter, status int, message string) {
		code := "InternalError"
		if status == http.StatusServiceUnavailable {
			code = "SlowDown"
		}
		writeS3Error(w, status, code, message)
	},
	version: func(resp *http.Response, _ []byte) string { return resp.Header.Get("ETag") },
}

// storeDialect is what the S3 and GCS proxies do differently around a
// recorded write: how they answer an error, and how they read the version
// a committed write made.
type storeDialect struct {
	name    string
	fail    func(w http.ResponseWriter, status int, message string)
	version func(resp *http.Response, body []byte) string
	// committed, if set, tells from a 2xx answer's body whether the write
	// committed; nil means it did.
	committed func(body []byte) bool
}

// forwardRecorded forwards a write (or a delete: rec.Deleted, body nil)
// and records it in the store's order for its key: the record is taken
// before the key is unlocked. It injects rec.Fault, which deletes never
// draw; the after-commit faults apply to commits only.
func (p *StoreProxy) forwardRecorded(w http.ResponseWriter, r *http.Request, rec StoreWrite, body []byte, d storeDialect) {
	if rec.Fault == "s3-error-before" {
		p.record(rec)
		d.fail(w, http.StatusServiceUnavailable, "injected by the robustness suite before forwarding")
		return
	}
	lock := p.keyLock(rec.Key)
	lock.Lock()
	resp, respBody, err := p.roundTrip(r, body)
	rec.Forwarded = true
	if err == nil {
		rec.Status = resp.StatusCode
		rec.Committed = resp.StatusCode/100 == 2 && (d.committed == nil || d.committed(respBody))
		if rec.Committed && !rec.Deleted {
			rec.ETag = d.version(resp, respBody)
		}
	}
	if !rec.Committed && rec.Fault != "" {
		rec.Fault = ""
	}
	rec.Done = time.Now()
	p.record(rec)
	lock.Unlock()
	if err != nil {
		d.fail(w, http.StatusBadGateway, d.name+" proxy: "+err.Error())
		return
	}
	switch {
	case rec.Committed && rec.Fault == "s3-error-after":
		d.fail(w, http.StatusInternalServerError, "injected by the robustness suite after the write committed")
	case rec.Committed && rec.Fault == "s3-drop-after":
		dropConnection(w)
	default:
		copyResponse(w, resp, respBody)
	}
}

// isUploadCreate reports whether r is a CreateMultipartUpload (POST
// ?uploads).
func isUploadCreate(r *http.Request) bool {
	return r.Method == http.MethodPost && objectKey(r) != "" && r.URL.Query().Has("uploads")
}

// isUploadComplete reports whether r is a CompleteMultipartUpload (POST
// ?uploadId=ID).
func isUploadComplete(r *http.Request) bool {
	return r.Method == http.MethodPost && objectKey(r) != "" && r.URL.Query().Get("uploadId") != ""
}

// forwardCreate forwards a CreateMultipartUpload and notes the token and
// op it names under the upload id S3 answers, for the record of the
// upload's completion.
func (p *StoreProxy) forwardCreate(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "s3 proxy: reading body: "+err.Error(), http.StatusBadRequest)
		return
	}
	resp, respBody, err := p.roundTrip(r, body)
	if err != nil {
		writeS3Error(w, http.StatusBadGateway, "InternalError", "s3 proxy: "+err.Error())
		return
	}
	var created struct {
		UploadID string `xml:"UploadId"`
	}
	if resp.StatusCode == http.StatusOK && xml.Unmarshal(respBody, &created) == nil && created.UploadID != "" {
		p.mu.Lock()
		p.uploads[created.UploadID] = upload{token: metadataToken(r.Header), op: opOf(nil, r.Header.Get("Content-Type"))}
		p.mu.Unlock()
	}
	copyResponse(w, resp, respBody)
}

// forwardComplete forwards a CompleteMultipartUpload and records it as a
// write of its object, with the token and op its upload's create named
// and the version S3 answers. It injects no fault.
func (p *StoreProxy) forwardComplete(w http.ResponseWriter, r *http.Request, gateway string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "s3 proxy: reading body: "+err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	up := p.uploads[r.URL.Query().Get("uploadId")]
	p.mu.Unlock()
	rec := StoreWrite{Gateway: gateway, Key: objectKey(r), Token: up.token, Op: up.op, Condition: condition(r.Header), At: time.Now()}
	p.forwardRecorded(w, r, rec, body, completeDialect)
}

// completeDialect is s3Dialect for completions: S3 names the new version
// in the answer's XML, and may answer 200 with an error document (the
// completion then committed nothing).
var completeDialect = storeDialect{
	name: "s3",
	fail: s3Dialect.fail,
	version: func(resp *http.Response, body []byte) string {
		var result struct {
			XMLName xml.Name
			ETag    string `xml:"ETag"`
		}
		if xml.Unmarshal(body, &result) != nil || result.XMLName.Local != "CompleteMultipartUploadResult" {
			return ""
		}
		return result.ETag
	},
	committed: func(body []byte) bool { return !bytes.Contains(body, []byte("<Error>")) },
}

// isObjectDelete reports whether r deletes one object (not a version, nor
// a batch).
func isObjectDelete(r *http.Request) bool {
	if r.Method != http.MethodDelete || objectKey(r) == "" {
		return false
	}
	for name := range r.URL.Query() {
		if name != "x-id" {
			return false
		}
	}
	return true
}

// roundTrip sends r, with body, to S3 and reads the whole answer.
func (p *StoreProxy) roundTrip(r *http.Request, body []byte) (*http.Response, []byte, error) {
	out, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, p.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	copyRequestHeader(out, r)
	out.ContentLength = int64(len(body))
	ctx, cancel := context.WithTimeout(out.Context(), 30*time.Second)
	defer cancel()
	resp, err := p.transport.RoundTrip(out.WithContext(ctx))
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, nil, err
	}
	return resp, respBody, nil
}

// forward passes a request other than an object write through.
func (p *StoreProxy) forward(w http.ResponseWriter, r *http.Request, _ []byte) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, "s3 proxy: reading body: "+err.Error(), http.StatusBadRequest)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	copyRequestHeader(out, r)
	out.ContentLength = int64(len(body))
	if len(body) == 0 && r.ContentLength <= 0 {
		out.Body = nil
	}
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		writeS3Error(w, http.StatusBadGateway, "InternalError", "s3 proxy: "+err.Error())
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// hopHeaders are not forwarded.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true,
	"Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// copyRequestHeader copies r's headers to out, and keeps r's Host: SigV4
// signed it.
func copyRequestHeader(out, r *http.Request) {
	for k, vs := range r.Header {
		if !hopHeaders[k] {
			out.Header[k] = vs
		}
	}
	out.Host = r.Host
}

func copyResponse(w http.ResponseWriter, resp *http.Response, body []byte) {
	for k, vs := range resp.Header {
		if !hopHeaders[k] {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// writeS3Error answers an S3 error document.
func writeS3Error(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message></Error>", code, message)
}

// dropConnection closes the client's connection without an answer.
func dropConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// metadataToken returns the fence token a write records, or zero.
func metadataToken(h http.Header) api.Token {
	t, err := api.ParseToken(h.Get("X-Amz-Meta-" + api.MetadataFenceToken))
	if err != nil {
		return 0
	}
	return t
}

// condition describes a write's precondition headers.
func condition(h http.Header) string {
	var parts []string
	if vs, ok := h["If-Match"]; ok {
		parts = append(parts, "If-Match: "+strings.Join(vs, ","))
	}
	if vs, ok := h["If-None-Match"]; ok {
		parts = append(parts, "If-None-Match: "+strings.Join(vs, ","))
	}
	return strings.Join(parts, "; ")
}

// opOf returns the op id of a workload write: the op parameter of its
// Content-Type ("text/plain; op=ID"), which the writes of identical bytes
// carry (WorkloadConfig.SameBytesShare), else the op its body names
// (bodyOp).
func opOf(body []byte, contentType string) string {
	if _, params, err := mime.ParseMediaType(contentType); err == nil && params["op"] != "" {
		return params["op"]
	}
	return bodyOp(body)
}

// errNoOp says a body names no workload operation.
var errNoOp = errors.New("no op in body")

// bodyOp returns the op id a workload body starts with ("op=ID ...").
func bodyOp(body []byte) string {
	op, err := parseBodyOp(body)
	if err != nil {
		return ""
	}
	return op
}

func parseBodyOp(body []byte) (string, error) {
	rest, ok := bytes.CutPrefix(body, []byte("op="))
	if !ok {
		return "", errNoOp
	}
	if i := bytes.IndexAny(rest, " \n"); i >= 0 {
		rest = rest[:i]
	}
	if len(rest) == 0 || len(rest) > 64 {
		return "", errNoOp
	}
	return string(rest), nil
}
