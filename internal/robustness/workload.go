package robustness

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"fencegate/api"
)

// WorkloadConfig shapes one history's traffic.
type WorkloadConfig struct {
	// Clients is how many clients run at once; Objects how many hot
	// objects they share.
	Clients, Objects int
	// ReadRatio is the share of operations that are reads.
	ReadRatio float64
	// StaleRatio is the share of lock grants after which the client stalls
	// past its lease before writing.
	StaleRatio float64
	// RetryRatio is the share of ambiguous writes retried with the same
	// token.
	RetryRatio float64
	// MaxOpsPerClient bounds each client's operations.
	MaxOpsPerClient int

	// EtaglessObjects is how many ETag-less objects a history of that
	// shape starts with: files the harness places in the bucket's
	// directory, which versitygw serves without an ETag (and which record
	// no token). Each opens with a race (see etaglessRace), then joins
	// the other objects.
	EtaglessObjects int
	// PartnerClients is how many clients of a history of that shape send
	// requests through the partner route PartnerRoute, on PartnerAccounts
	// accounts.
	PartnerClients, PartnerAccounts int
	// ImplausibleRatio is the share of partner requests sent with a token
	// that no lock issued: 2^62 and above, far beyond etcd's revision.
	ImplausibleRatio float64
	// EtaglessShare and PartnerShare are the shares of histories with the
	// ETag-less shape and the partner shape, drawn from each history's
	// seed. Zero means none. The partner shape needs the gateways'
	// --token-checks to be "*=plausible" (the suite sets it when
	// PartnerShare is above zero).
	EtaglessShare, PartnerShare float64
	// SameBytesShare is the share of histories whose writers write
	// identical bytes (SameBytes), drawn from each history's seed. Zero
	// means none.
	SameBytesShare float64
	// SameBytes makes every write's body one of two fixed byte strings,
	// so that an object often goes back to bytes it had before: the
	// shape of the ETag ABA limit on S3 (two versions with the same bytes
	// have the same ETag), which GCS's generations do not have. The
	// operation is named by the op parameter of the Content-Type, which
	// is metadata, outside the bytes that S3's ETag hashes.
	SameBytes bool
	// Store is the store of the history's bucket: api.StoreS3 (Bucket;
	// empty means it) or api.StoreGCS (GCSBucket).
	Store string
	// MultipartRatio is the share of lock grants, in an S3 history, after
	// which the holder writes by a multipart upload through a gateway's
	// S3 API (multipartWrite) instead of PUTs; a stale holder stalls
	// between its part and its completion. StaleAbortRatio is the share
	// of stale holders, in an S3 history, that first try to abort a newer
	// holder's upload by the store's id with their stale token
	// (staleAbort). GCS buckets answer multipart 501: a GCS history has
	// neither.
	MultipartRatio, StaleAbortRatio float64
	// TicketRatio is the share of lock grants, of those that do not write
	// by a multipart upload, after which the holder writes by ticket
	// (ticketWrite): it asks a gateway for a ticket and sends the bytes
	// straight to the store, as its plan says (ticketPlan). A GCS bucket
	// answers the request 501, and the holder then writes through the
	// gateway.
	TicketRatio float64
}

// DefaultWorkload is the workload of the suite's histories. The two newer
// shapes (ETag-less objects, partner requests under a plausible policy)
// are sized here but off: WithShapes turns them on, as TestRobustness does
// by default.
var DefaultWorkload = WorkloadConfig{Clients: 8, Objects: 4, ReadRatio: 0.2, StaleRatio: 0.15, RetryRatio: 0.5, MaxOpsPerClient: 400,
	EtaglessObjects: 2, PartnerClients: 2, PartnerAccounts: 2, ImplausibleRatio: 0.1, MultipartRatio: 0.35, StaleAbortRatio: 0.7,
	TicketRatio: 0.35}

// WithShapes returns cfg with the ETag-less shape in half the histories if
// etagless, and the partner shape in half the histories if partners.
func (cfg WorkloadConfig) WithShapes(etagless, partners bool) WorkloadConfig {
	if etagless {
		cfg.EtaglessShare = 0.5
	}
	if partners {
		cfg.PartnerShare = 0.5
	}
	return cfg
}

// WithSameBytes returns cfg with writes of identical bytes (SameBytes) in
// half the histories if on.
func (cfg WorkloadConfig) WithSameBytes(on bool) WorkloadConfig {
	if on {
		cfg.SameBytesShare = 0.5
	}
	return cfg
}

// forHistory returns the workload of one history: the shapes that rnd does
// not draw for it are left out.
func (cfg WorkloadConfig) forHistory(rnd *rand.Rand) WorkloadConfig {
	if !(rnd.Float64() < cfg.EtaglessShare) {
		cfg.EtaglessObjects = 0
	}
	if !(rnd.Float64() < cfg.PartnerShare) {
		cfg.PartnerClients = 0
	}
	cfg.SameBytes = cfg.SameBytes || rnd.Float64() < cfg.SameBytesShare
	return cfg
}

// onStore returns cfg for a history on store (api.StoreS3 or
// api.StoreGCS). The ETag-less shape is S3's only: it places files in
// versitygw's bucket directory.
func (cfg WorkloadConfig) onStore(store string) WorkloadConfig {
	cfg.Store = store
	if store == api.StoreGCS {
		cfg.EtaglessObjects = 0
		cfg.MultipartRatio, cfg.StaleAbortRatio = 0, 0
	}
	return cfg
}

// gcs reports whether the workload's bucket is in GCS.
func (cfg WorkloadConfig) gcs() bool { return cfg.Store == api.StoreGCS }

// bucket is the bucket of the workload's objects.
func (cfg WorkloadConfig) bucket() string {
	if cfg.gcs() {
		return GCSBucket
	}
	return Bucket
}

// store is the store of the workload's objects.
func (cfg WorkloadConfig) store() string {
	if cfg.gcs() {
		return api.StoreGCS
	}
	return api.StoreS3
}

// lockTTL is the lease of every lock session, in seconds: etcd's minimum
// with the members' 50 ms heartbeat and 500 ms election timeout.
const lockTTL = 1

// clientTimeout bounds each HTTP request of the workload. It is longer
// than a pause-after-fence hold, so that a held write is answered.
const clientTimeout = maxPause + 3*time.Second

// Workload runs clients against a cluster and records a History.
type Workload struct {
	cfg     WorkloadConfig
	cluster *Cluster
	prefix  string // object keys start with it: "h3-1234/"
	history *History
	http    *http.Client

	leaseMu  sync.Mutex
	leases   map[string]clientv3.LeaseID // key + "@" + token -> the lock holder's lease
	scripted *clientState                // WriteVia's client
	prober   *clientState                // StaleProbe's client

	// etaglessDone is closed when the ETag-less objects' opening races
	// are over: until then the other clients leave those objects alone.
	etaglessDone chan struct{}
	// etaglessHeld counts the opening races whose first write was held.
	etaglessHeld int

	partnerMu  sync.Mutex
	partnerOps []PartnerOp

	// cores are the clients of each gateway's S3 API, by gateway name;
	// s3http sends the S3 requests minio-go cannot shape.
	cores  map[string]*minio.Core
	s3http *http.Client
	// uploads holds the token each upload the workload created is bound
	// to, by the store's upload id.
	uploadMu sync.Mutex
	uploads  map[string]api.Token
}

// NewWorkload returns a workload on keys prefix+"obj-N".
func NewWorkload(cfg WorkloadConfig, cluster *Cluster, prefix string) *Workload {
	cores, s3http, err := doorClients(cluster)
	if err != nil {
		panic(err) // the gateways' S3 URLs are the harness's own: a bug
	}
	return &Workload{
		cores:   cores,
		s3http:  s3http,
		uploads: make(map[string]api.Token),
		cfg:     cfg,
		cluster: cluster,
		prefix:  prefix,
		history: NewHistory(cfg.Clients),
		http: &http.Client{Timeout: clientTimeout, Transport: authorizing{cluster, &http.Transport{
			MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second,
		}}},
		leases:       make(map[string]clientv3.LeaseID),
		etaglessDone: make(chan struct{}),
	}
}

// authorizing is a transport that sends the suite's bearer key with
// every request (Cluster.Authorize): the gateways' auth config, which
// their S3 API needs, makes the REST API ask for it.
type authorizing struct {
	cluster *Cluster
	base    *http.Transport
}

func (a authorizing) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	a.cluster.Authorize(req)
	return a.base.RoundTrip(req)
}

// CloseIdleConnections closes the base transport's idle connections.
func (a authorizing) CloseIdleConnections() { a.base.CloseIdleConnections() }

// resourcePrefix starts the resource names of the workload's objects:
// "s3/robustness/" or "gcs/robustness-gcs/".
func (w *Workload) resourcePrefix() string { return w.cfg.store() + "/" + w.cfg.bucket() + "/" }

// objectURL is key's URL at gateway g.
func (w *Workload) objectURL(g *Gateway, key string) string {
	return g.URL + "/v1/objects/" + w.cfg.bucket() + "/" + key
}

// History returns the history recorded so far.
func (w *Workload) History() *History { return w.history }

// Keys returns the objects' keys: the objects the workload creates, then
// the ETag-less ones.
func (w *Workload) Keys() []string {
	var keys []string
	for i := range w.cfg.Objects {
		keys = append(keys, fmt.Sprintf("%sobj-%d", w.prefix, i+1))
	}
	return append(keys, w.EtaglessKeys()...)
}

// EtaglessKeys returns the keys of the ETag-less objects.
func (w *Workload) EtaglessKeys() []string {
	var keys []string
	for i := range w.cfg.EtaglessObjects {
		keys = append(keys, fmt.Sprintf("%sbare-%d", w.prefix, i+1))
	}
	return keys
}

// Close releases idle connections.
func (w *Workload) Close() {
	w.http.CloseIdleConnections()
	w.s3http.CloseIdleConnections()
}

// Run runs the clients until stop is closed or each has done its
// operations. PlaceEtagless must have placed the ETag-less objects.
func (w *Workload) Run(ctx context.Context, seed uint64, stop <-chan struct{}) {
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(w.etaglessDone)
		for i, key := range w.EtaglessKeys() {
			w.etaglessRace(ctx, key, 100+2*i, rand.New(rand.NewPCG(seed, uint64(100+i))))
		}
	})
	for c := range w.cfg.Clients {
		wg.Go(func() {
			w.client(ctx, c, rand.New(rand.NewPCG(seed, uint64(c))), stop)
		})
	}
	for c := range w.cfg.PartnerClients {
		wg.Go(func() {
			w.partnerClient(ctx, 200+c, rand.New(rand.NewPCG(seed, uint64(200+c))), stop)
		})
	}
	wg.Wait()
}

// FinalReads reads every object through every gateway, into the history.
func (w *Workload) FinalReads(ctx context.Context) {
	for _, key := range w.Keys() {
		for _, g := range w.cluster.Gateways {
			w.read(ctx, -1, -1, g, key)
		}
	}
}

// HolderLease returns the lease of the lock holder that got token for
// key.
func (w *Workload) HolderLease(key string, token api.Token) (clientv3.LeaseID, bool) {
	w.leaseMu.Lock()
	defer w.leaseMu.Unlock()
	id, ok := w.leases[fmt.Sprintf("%s@%d", key, token)]
	return id, ok
}

// clientState is one client's loop state.
type clientState struct {
	id      int
	process int
	ops     int
	rnd     *rand.Rand
}

func (w *Workload) client(ctx context.Context, id int, rnd *rand.Rand, stop <-chan struct{}) {
	cs := &clientState{id: id, process: id, rnd: rnd}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		case <-ctx.Done():
			return true
		default:
			return false
		}
	}
	for cs.ops < w.cfg.MaxOpsPerClient && !stopped() {
		keys := w.Keys()
		select {
		case <-w.etaglessDone:
		default:
			keys = keys[:w.cfg.Objects]
		}
		key := keys[rnd.IntN(len(keys))]
		if rnd.Float64() < w.cfg.ReadRatio {
			cs.process = w.read(ctx, cs.id, cs.process, w.gateway(rnd), key)
			cs.ops++
			continue
		}
		if err := w.lockedWrites(ctx, cs, key, stop); err != nil {
			// The lock service is down or slow (a fault): back off.
			select {
			case <-time.After(time.Duration(20+rnd.IntN(80)) * time.Millisecond):
			case <-stop:
			}
		}
	}
}

func (w *Workload) gateway(rnd *rand.Rand) *Gateway {
	return w.cluster.Gateways[rnd.IntN(len(w.cluster.Gateways))]
}

// lockedWrites takes key's lock, whose fencing token is the create
// revision of the holder's lock key, and writes with it one to four
// times, by a multipart upload (multipartWrite) or by ticket
// (ticketWrite); as a stale client, it lets its lease expire first.
func (w *Workload) lockedWrites(ctx context.Context, cs *clientState, key string, stop <-chan struct{}) error {
	lockCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	session, mutex, token, err := w.takeLock(lockCtx, key)
	if err != nil {
		return err
	}
	defer session.Close() // revokes the lease if it still exists (bounded by the client's timeouts)
	w.recordLease(key, token, session.Lease())

	stale := cs.rnd.Float64() < w.cfg.StaleRatio
	// Stall past the lease: stop renewing it and wait until the lock key
	// is gone, then a little more, so that others can take the lock and
	// write.
	stall := func() {
		session.Orphan()
		w.waitGone(ctx, mutex.Key(), 3*time.Second, stop)
		select {
		case <-time.After(time.Duration(100+cs.rnd.IntN(500)) * time.Millisecond):
		case <-stop:
		}
		if cs.rnd.Float64() < w.cfg.StaleAbortRatio {
			w.staleAbort(ctx, cs, key, token, stop)
		}
	}
	if strings.Contains(key, "/obj-") && cs.rnd.Float64() < w.cfg.MultipartRatio {
		if !stale {
			stall = nil
		}
		w.multipartWrite(ctx, cs, key, token, stall)
		if !stale {
			unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = mutex.Unlock(unlockCtx)
			cancel()
		}
		return nil
	}
	ticket := strings.Contains(key, "/obj-") && cs.rnd.Float64() < w.cfg.TicketRatio
	if stale {
		stall()
	}
	if ticket {
		released := false
		release := func() {
			if !stale && !released {
				released = true
				unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
				_ = mutex.Unlock(unlockCtx)
				cancel()
			}
		}
		if w.ticketWrite(ctx, cs, key, token, stale, release, stop) {
			release()
			return nil
		}
	}
	writes := 1 + cs.rnd.IntN(4)
	for i := 0; i < writes && cs.ops < w.cfg.MaxOpsPerClient; i++ {
		outcome := w.write(ctx, cs, key, token, stale, false)
		if outcome == Ambiguous && cs.rnd.Float64() < w.cfg.RetryRatio && cs.ops < w.cfg.MaxOpsPerClient {
			outcome = w.write(ctx, cs, key, token, stale, true)
		}
		if outcome == RefusedStale {
			break // the lock has moved on
		}
		select {
		case <-session.Done():
			return nil // the lease is gone: so is the lock
		default:
		}
	}
	if !stale {
		unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = mutex.Unlock(unlockCtx)
		cancel()
	}
	return nil
}

// waitGone waits until key is deleted (the lease expired), within bound.
func (w *Workload) waitGone(ctx context.Context, key string, bound time.Duration, stop <-chan struct{}) {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		gctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		resp, err := w.cluster.Client.Get(gctx, key, clientv3.WithCountOnly())
		cancel()
		if err == nil && resp.Count == 0 {
			return
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-stop:
			return
		}
	}
}

// sameBytes are the bodies of the writes of identical bytes
// (WorkloadConfig.SameBytes): two, so that an object often goes back to
// bytes it had.
var sameBytes = []string{"same bytes: A\n", "same bytes: B\n"}

// problem is the part of a problem+json answer the workload reads.
type problem struct {
	Type          string    `json:"type"`
	HighWaterMark api.Token `json:"high_water_mark"`
}

// write PUTs a body naming a fresh op through a random gateway, and
// records the outcome.
func (w *Workload) write(ctx context.Context, cs *clientState, key string, token api.Token, stale, retry bool) Outcome {
	return w.writeVia(ctx, cs, w.gateway(cs.rnd), key, token, stale, retry).Outcome
}

// WriteVia writes key with token through g, as client 0, and returns the
// operation as recorded.
func (w *Workload) WriteVia(ctx context.Context, g *Gateway, key string, token api.Token) Op {
	w.leaseMu.Lock()
	if w.scripted == nil {
		w.scripted = &clientState{id: 0, process: 0, rnd: rand.New(rand.NewPCG(0, 0))}
	}
	cs := w.scripted
	w.leaseMu.Unlock()
	return w.writeVia(ctx, cs, g, key, token, false, false)
}

// Acquire takes key's lock and returns its fencing token; release lets it
// go.
func (w *Workload) Acquire(ctx context.Context, key string) (token api.Token, release func(), err error) {
	token, release, _, err = w.lock(ctx, key)
	return token, release, err
}

// lock takes key's lock, records its lease for HolderLease, and returns
// its fencing token (the create revision of the holder's key), what
// releases it, and its lease.
func (w *Workload) lock(ctx context.Context, key string) (api.Token, func(), clientv3.LeaseID, error) {
	session, mutex, token, err := w.takeLock(ctx, key)
	if err != nil {
		return 0, nil, 0, err
	}
	w.recordLease(key, token, session.Lease())
	return token, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = mutex.Unlock(ctx)
		session.Close()
	}, session.Lease(), nil
}

// takeLock takes the etcd Mutex /rb-locks/name on a new session whose
// lease has lockTTL, and returns the session, the mutex and its fencing
// token: the create revision of the holder's key. On an error it closes
// the session; otherwise the caller does.
func (w *Workload) takeLock(ctx context.Context, name string) (*concurrency.Session, *concurrency.Mutex, api.Token, error) {
	session, err := concurrency.NewSession(w.cluster.Client, concurrency.WithTTL(lockTTL), concurrency.WithContext(ctx))
	if err != nil {
		return nil, nil, 0, err
	}
	mutex := concurrency.NewMutex(session, "/rb-locks/"+name)
	if err := mutex.Lock(ctx); err != nil {
		session.Close()
		return nil, nil, 0, err
	}
	resp, err := w.cluster.Client.Get(ctx, mutex.Key())
	if err != nil || len(resp.Kvs) != 1 {
		session.Close()
		return nil, nil, 0, fmt.Errorf("read lock key: %v", err)
	}
	return session, mutex, api.Token(resp.Kvs[0].CreateRevision), nil
}

// recordLease records the lease of key's lock holder with token, for
// HolderLease.
func (w *Workload) recordLease(key string, token api.Token, lease clientv3.LeaseID) {
	w.leaseMu.Lock()
	w.leases[fmt.Sprintf("%s@%d", key, token)] = lease
	w.leaseMu.Unlock()
}

func (w *Workload) writeVia(ctx context.Context, cs *clientState, g *Gateway, key string, token api.Token, stale, retry bool) Op {
	cs.ops++
	id := fmt.Sprintf("%sc%d-%d", strings.ReplaceAll(w.prefix, "/", "-"), cs.id, cs.ops)
	body := fmt.Sprintf("op=%s token=%d client=%d stale=%t retry=%t\n", id, token, cs.id, stale, retry)
	if w.cfg.SameBytes {
		body = sameBytes[cs.rnd.IntN(len(sameBytes))]
	}
	op := Op{ID: id, Client: cs.id, Process: cs.process, Kind: OpWrite, Key: key, Token: token, Gateway: g.Name, Stale: stale, Retry: retry}
	if !w.cfg.gcs() {
		op.ETag = bodyETag([]byte(body)) // on GCS, the generation: known from the answer, or from the record (Check)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, w.objectURL(g, key), strings.NewReader(body))
	if err != nil {
		panic(err) // a bug in the workload
	}
	req.Header.Set(api.HeaderFenceToken, token.String())
	req.Header.Set("X-Request-Id", id)
	req.Header.Set("Content-Type", mime.FormatMediaType("text/plain", map[string]string{"op": id}))
	op.Call = w.history.Now()
	w.history.Invoke(token, op.Call)
	resp, err := w.http.Do(req)
	op.Return = w.history.Now()
	switch {
	case err != nil:
		op.Outcome, op.Err = Ambiguous, err.Error()
	default:
		data := readAnswer(&op, resp)
		if op.Outcome == Acked {
			var result writeResult
			if err := json.Unmarshal(data, &result); err == nil && result.ETag != "" {
				op.ReplacedKnown, op.Created, op.Replaced = true, result.Created, result.ReplacedETag
				if w.cfg.gcs() {
					op.ETag = result.ETag
				} else if result.ETag != op.ETag {
					op.Err = fmt.Sprintf("unexpected answer: ETag %s, want the MD5 of the body %s", result.ETag, op.ETag)
				}
			}
		}
		if op.Outcome == Failed || op.Outcome == Ambiguous && resp.StatusCode < 500 {
			op.Err = fmt.Sprintf("unexpected answer %d: %s", resp.StatusCode, data)
			op.Outcome = Ambiguous
		}
	}
	cs.process = w.history.Add(op)
	return op
}

// probeClientID names the client of StaleProbe's writes in their ids: no
// workload client (ids from 0), ETag-less writer (from 100) or partner
// client uses it.
const probeClientID = 900

// StaleProbe writes to key with token through g, as a writer known to be
// stale (Op.Stale), as a client of its own, and records the outcome in
// the history.
func (w *Workload) StaleProbe(ctx context.Context, g *Gateway, key string, token api.Token) Op {
	w.leaseMu.Lock()
	if w.prober == nil {
		w.prober = &clientState{id: probeClientID, process: w.history.NewProcess(), rnd: rand.New(rand.NewPCG(0, 0))}
	}
	cs := w.prober
	w.leaseMu.Unlock()
	return w.writeVia(ctx, cs, g, key, token, true, false)
}

// deleteVia DELETEs key with token through g, and records the outcome.
func (w *Workload) deleteVia(ctx context.Context, cs *clientState, g *Gateway, key string, token api.Token, stale bool) Op {
	cs.ops++
	id := fmt.Sprintf("%sc%d-%d", strings.ReplaceAll(w.prefix, "/", "-"), cs.id, cs.ops)
	op := Op{ID: id, Client: cs.id, Process: cs.process, Kind: OpDelete, Key: key, Token: token, Gateway: g.Name, Stale: stale}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, w.objectURL(g, key), nil)
	if err != nil {
		panic(err) // a bug in the workload
	}
	req.Header.Set(api.HeaderFenceToken, token.String())
	req.Header.Set("X-Request-Id", id)
	op.Call = w.history.Now()
	w.history.Invoke(token, op.Call)
	resp, err := w.http.Do(req)
	op.Return = w.history.Now()
	if err != nil {
		op.Outcome, op.Err = Ambiguous, err.Error()
		cs.process = w.history.Add(op)
		return op
	}
	data := readAnswer(&op, resp)
	if resp.StatusCode == http.StatusNoContent {
		op.Outcome = Acked
	}
	if op.Outcome == Ambiguous && resp.StatusCode < 500 || op.Outcome == Acked && resp.StatusCode != http.StatusNoContent {
		op.Err = fmt.Sprintf("unexpected answer %d: %s", resp.StatusCode, data)
		op.Outcome = Ambiguous
	}
	cs.process = w.history.Add(op)
	return op
}

// readAnswer reads a write's or a delete's answer into op: its status,
// its problem type, its outcome (writeOutcome) and, for a stale refusal,
// the high-water mark. It returns the body, at most 64 KiB of it, for the
// caller's own checks.
func readAnswer(op *Op, resp *http.Response) []byte {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	op.Status = resp.StatusCode
	var p problem
	if strings.HasPrefix(resp.Header.Get("Content-Type"), api.ContentTypeProblem) {
		_ = json.Unmarshal(data, &p)
	}
	op.ProblemType = p.Type
	op.Outcome = writeOutcome(resp.StatusCode, p.Type)
	if op.Outcome == RefusedStale {
		op.HighWaterMark = p.HighWaterMark
	}
	return data
}

// writeResult is the part of a write's answer the workload reads (the
// gateway's WriteResult).
type writeResult struct {
	ETag         string `json:"etag"`
	Created      bool   `json:"created"`
	ReplacedETag string `json:"replaced_etag"`
}

// bodyETag is the ETag S3 gives a single-part body: its quoted MD5.
func bodyETag(body []byte) string {
	sum := md5.Sum(body)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

// writeOutcome classifies a gateway's answer to a write.
func writeOutcome(status int, problemType string) Outcome {
	switch {
	case status == http.StatusOK || status == http.StatusCreated:
		return Acked
	case problemType == api.ProblemTypePrefix+"stale-token":
		return RefusedStale
	case problemType == api.ProblemTypePrefix+"concurrent-modification",
		problemType == api.ProblemTypePrefix+"fence-unavailable":
		return Refused
	}
	return Ambiguous
}

// read GETs key through g and records what it found. client -1 is the
// harness's final reads. It returns the process id to use next.
func (w *Workload) read(ctx context.Context, client, process int, g *Gateway, key string) int {
	if client < 0 {
		w.history.mu.Lock()
		process = w.history.nextProcess
		w.history.nextProcess++
		w.history.mu.Unlock()
	}
	op := Op{ID: fmt.Sprintf("read-%d", w.history.Now()), Client: client, Process: process, Kind: OpRead, Key: key, Gateway: g.Name}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.objectURL(g, key), nil)
	if err != nil {
		panic(err)
	}
	op.Call = w.history.Now()
	resp, err := w.http.Do(req)
	if err == nil {
		data, readErr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		op.Return = w.history.Now()
		op.Status = resp.StatusCode
		switch {
		case readErr != nil:
			op.Outcome, op.Err = Failed, readErr.Error()
		case resp.StatusCode == http.StatusOK:
			op.ReadExists = true
			op.ReadValue = opOf(data, resp.Header.Get("Content-Type"))
			op.ReadToken, _ = api.ParseToken(resp.Header.Get(api.HeaderFenceToken))
		case resp.StatusCode == http.StatusNotFound:
		default:
			op.Outcome, op.Err = Failed, fmt.Sprintf("answer %d: %s", resp.StatusCode, data)
		}
	} else {
		op.Return = w.history.Now()
		op.Outcome, op.Err = Failed, err.Error()
	}
	return w.history.Add(op)
}
