package robustness

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/signer"

	"fencegate/api"
)

// The multipart shape, in every S3 history (GCS buckets answer multipart
// 501): a lock holder uploads through a gateway's S3 API instead of PUT.
// It creates the upload with its token (the create's fence check raises
// the mark, and the gateway binds the upload to the token), sends its one
// part by the id it was answered, and completes it: the completion is
// the write, recorded as an OpWrite with the upload's token. A holder
// that stalls past its lease does so between its part and its
// completion, so that a newer holder can write first; it then sends its
// part again and completes, and each must be refused 409 StaleFenceToken
// once the mark has moved (the gateway then aborts the upload). And a
// stale holder, after its stall, looks for a newer holder's upload of the
// key in progress (ListMultipartUploads shows the store's id) and aborts
// it by that id with its own stale token: the gateway must refuse it
// (checkStaleAborts).

// s3Region is the region the gateways' S3 API takes signatures for (the
// default of --s3-api-region).
const s3Region = "us-east-1"

// headerHighWaterMark is the header of the mark in the S3 API's stale
// refusals.
const headerHighWaterMark = "X-Fence-High-Water-Mark"

// emptySHA256 is the hex SHA-256 of an empty body.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// answerKey is the context key of the *doorAnswer a door request records
// its answer in.
type answerKey struct{}

// doorAnswer is the status and headers of a door request's last answer.
type doorAnswer struct {
	status int
	header http.Header
}

// recordingTransport records each answer in the request's doorAnswer, if
// its context has one: minio-go's errors carry no headers, and a stale
// refusal's mark is in X-Fence-High-Water-Mark.
type recordingTransport struct{ base *http.Transport }

func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if a, ok := req.Context().Value(answerKey{}).(*doorAnswer); ok && err == nil {
		a.status, a.header = resp.StatusCode, resp.Header.Clone()
	}
	return resp, err
}

// doorClients returns a minio-go Core for each gateway's S3 API, signing
// with the suite's access key, without retries (a retried request would
// be another operation), and the plain HTTP client of the requests that
// minio-go cannot shape (an abort with X-Fence-Token, a listing without a
// delimiter).
func doorClients(cluster *Cluster) (map[string]*minio.Core, *http.Client, error) {
	transport := &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	cores := make(map[string]*minio.Core)
	for _, g := range cluster.Gateways {
		core, err := minio.NewCore(strings.TrimPrefix(g.S3URL, "http://"), &minio.Options{
			Creds: credentials.NewStaticV4(cluster.S3AccessKey, cluster.S3SecretKey, ""), Region: s3Region,
			BucketLookup: minio.BucketLookupPath, Transport: recordingTransport{transport}, MaxRetries: 1,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("s3 api client of %s: %w", g.Name, err)
		}
		cores[g.Name] = core
	}
	return cores, &http.Client{Timeout: clientTimeout, Transport: transport}, nil
}

// multipartETag is S3's ETag of an object completed from parts: the MD5
// of the parts' MD5s, "-" and the number of parts, quoted.
func multipartETag(parts ...[]byte) string {
	var sums []byte
	for _, p := range parts {
		sum := md5.Sum(p)
		sums = append(sums, sum[:]...)
	}
	sum := md5.Sum(sums)
	return fmt.Sprintf(`"%s-%d"`, hex.EncodeToString(sum[:]), len(parts))
}

// storeUploadID is the store's id in an upload id the gateway answered its
// creator: "<store's id>.<secret>".
func storeUploadID(creatorID string) string {
	if i := strings.LastIndexByte(creatorID, '.'); i > 0 {
		return creatorID[:i]
	}
	return creatorID
}

// doorOutcome classifies the S3 API's answer to an upload step, as
// writeOutcome does the REST API's: the outcome, the problem type of the
// REST API's vocabulary it stands for, and whether the answer is one the
// door can give to this step (notFoundOK: NoSuchUpload is).
func doorOutcome(status int, code string, notFoundOK bool) (Outcome, string, bool) {
	switch {
	case status == http.StatusOK || status == http.StatusNoContent:
		return Acked, "", true
	case code == "StaleFenceToken":
		return RefusedStale, api.ProblemTypePrefix + "stale-token", true
	case code == "ConditionalRequestConflict":
		return Refused, api.ProblemTypePrefix + "concurrent-modification", true
	case code == "ServiceUnavailable":
		return Refused, api.ProblemTypePrefix + "fence-unavailable", true
	case status >= 500, status == 0:
		return Ambiguous, "", true
	case code == "NoSuchUpload" && notFoundOK:
		return Ambiguous, "", true
	}
	return Ambiguous, "", false
}

// doorCall runs one minio-go call on an upload step, and fills op's
// outcome, status, problem type and, for a stale refusal, the mark.
func (w *Workload) doorCall(ctx context.Context, op *Op, notFoundOK bool, call func(ctx context.Context) error) {
	answer := &doorAnswer{}
	op.Call = w.history.Now()
	err := call(context.WithValue(ctx, answerKey{}, answer))
	op.Return = w.history.Now()
	op.Status = answer.status
	if err == nil {
		op.Outcome = Acked
		return
	}
	resp := minio.ToErrorResponse(err)
	if resp.StatusCode == 0 {
		op.Outcome, op.Err = Ambiguous, err.Error()
		return
	}
	w.classifyDoorAnswer(op, resp.StatusCode, resp.Code, answer.header, notFoundOK, err.Error())
}

// classifyDoorAnswer fills op from the door's error answer.
func (w *Workload) classifyDoorAnswer(op *Op, status int, code string, header http.Header, notFoundOK bool, detail string) {
	op.Status = status
	outcome, problemType, expected := doorOutcome(status, code, notFoundOK)
	op.Outcome, op.ProblemType, op.Err = outcome, problemType, detail
	if outcome == RefusedStale {
		op.HighWaterMark, _ = api.ParseToken(header.Get(headerHighWaterMark))
	}
	if !expected {
		op.Err = fmt.Sprintf("unexpected answer %d %s: %s", status, code, detail)
	}
}

// uploadStep records a step of an upload (create, part, abort) of key
// with token through g.
func (w *Workload) uploadStep(ctx context.Context, cs *clientState, kind OpKind, id string, g *Gateway, key string, token api.Token, stale bool, call func(ctx context.Context) error) Op {
	op := Op{ID: id, Client: cs.id, Process: cs.process, Kind: kind, Key: key, Token: token, UploadToken: token, Gateway: g.Name, Stale: stale}
	if kind == OpUploadCreate {
		w.history.Invoke(token, w.history.Now())
	}
	w.doorCall(ctx, &op, kind != OpUploadCreate, call)
	return op
}

// multipartWrite writes key with token as a multipart upload through the
// gateways' S3 API (see the shape's comment above); stall, if not nil,
// stalls the holder past its lease between its part and its completion.
func (w *Workload) multipartWrite(ctx context.Context, cs *clientState, key string, token api.Token, stall func()) {
	cs.ops++
	id := fmt.Sprintf("%sc%d-%d", strings.ReplaceAll(w.prefix, "/", "-"), cs.id, cs.ops)
	stale := stall != nil
	body := []byte(fmt.Sprintf("op=%s token=%d client=%d stale=%t multipart=true\n", id, token, cs.id, stale))
	if w.cfg.SameBytes {
		body = []byte(sameBytes[cs.rnd.IntN(len(sameBytes))])
	}
	contentType := mime.FormatMediaType("text/plain", map[string]string{"op": id})

	var creatorID string
	g := w.gateway(cs.rnd)
	create := w.uploadStep(ctx, cs, OpUploadCreate, id+"-create", g, key, token, stale, func(ctx context.Context) error {
		var err error
		creatorID, err = w.cores[g.Name].NewMultipartUpload(ctx, w.cfg.bucket(), key, minio.PutObjectOptions{
			ContentType: contentType, UserMetadata: map[string]string{api.MetadataFenceToken: token.String()},
		})
		return err
	})
	upload := storeUploadID(creatorID)
	create.Upload = upload
	cs.process = w.history.Add(create)
	if create.Outcome != Acked {
		return
	}
	w.uploadMu.Lock()
	w.uploads[upload] = token
	w.uploadMu.Unlock()

	sendPart := func(n int) (minio.ObjectPart, bool) {
		var part minio.ObjectPart
		g := w.gateway(cs.rnd)
		op := w.uploadStep(ctx, cs, OpUploadPart, fmt.Sprintf("%s-part-%d", id, n), g, key, token, stale, func(ctx context.Context) error {
			var err error
			part, err = w.cores[g.Name].PutObjectPart(ctx, w.cfg.bucket(), key, creatorID, 1, strings.NewReader(string(body)), int64(len(body)), minio.PutObjectPartOptions{})
			return err
		})
		op.Upload = upload
		cs.process = w.history.Add(op)
		return part, op.Outcome == Acked
	}
	part, ok := sendPart(1)
	if ok && stall != nil {
		stall()
		// The part again, now stale if a newer holder took the lock: the
		// gateway refuses it and aborts the upload.
		part, ok = sendPart(2)
	} else if ok {
		// Hold the upload open a while: a stale holder may find it.
		select {
		case <-time.After(time.Duration(150+cs.rnd.IntN(300)) * time.Millisecond):
		case <-ctx.Done():
		}
	}
	if !ok {
		w.abortOwn(ctx, cs, id, key, token, upload, creatorID, stale)
		return
	}

	g = w.gateway(cs.rnd)
	op := Op{ID: id, Client: cs.id, Process: cs.process, Kind: OpWrite, Key: key, Token: token, Gateway: g.Name, Stale: stale,
		ETag: multipartETag(body), Upload: upload, UploadToken: token}
	var info minio.UploadInfo
	w.history.Invoke(token, w.history.Now())
	w.doorCall(ctx, &op, true, func(ctx context.Context) error {
		var err error
		info, err = w.cores[g.Name].CompleteMultipartUpload(ctx, w.cfg.bucket(), key, creatorID,
			[]minio.CompletePart{{PartNumber: 1, ETag: part.ETag}}, minio.PutObjectOptions{})
		return err
	})
	if op.Outcome == Acked && `"`+strings.Trim(info.ETag, `"`)+`"` != op.ETag {
		op.Err = fmt.Sprintf("unexpected answer: ETag %s, want %s (the multipart ETag of the one part)", info.ETag, op.ETag)
	}
	cs.process = w.history.Add(op)
}

// abortOwn aborts the holder's own upload by the id it was answered, after
// a part that did not land (a stale part's upload the gateway has already
// aborted: NoSuchUpload then).
func (w *Workload) abortOwn(ctx context.Context, cs *clientState, id, key string, token api.Token, upload, creatorID string, stale bool) {
	g := w.gateway(cs.rnd)
	op := w.uploadStep(ctx, cs, OpUploadAbort, id+"-abort", g, key, token, stale, func(ctx context.Context) error {
		return w.cores[g.Name].AbortMultipartUpload(ctx, w.cfg.bucket(), key, creatorID)
	})
	op.Upload = upload
	cs.process = w.history.Add(op)
}

// staleAbort is a stale holder's try at a newer holder's upload: it looks,
// for a little while, for an upload of key in progress that is bound to a
// larger token than its own, and aborts it by the store's id with its own
// token, which the gateway must refuse. It reports whether it sent one.
func (w *Workload) staleAbort(ctx context.Context, cs *clientState, key string, token api.Token, stop <-chan struct{}) bool {
	for range 10 {
		g := w.gateway(cs.rnd)
		ids, err := w.listUploads(ctx, g, key)
		if err == nil {
			for _, upload := range ids {
				w.uploadMu.Lock()
				bound, known := w.uploads[upload]
				w.uploadMu.Unlock()
				if known && bound > token {
					w.abortByStoreID(ctx, cs, key, token, upload, bound)
					return true
				}
			}
		}
		select {
		case <-time.After(80 * time.Millisecond):
		case <-stop:
			return false
		}
	}
	return false
}

// signedRequest is a request to g's S3 API, signed with the suite's key.
func (w *Workload) signedRequest(ctx context.Context, method string, g *Gateway, key string, query url.Values, header http.Header) *http.Request {
	u := g.S3URL + "/" + w.cfg.bucket() + "/" + key + "?" + query.Encode()
	if key == "" {
		u = g.S3URL + "/" + w.cfg.bucket() + "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		panic(err) // a bug in the workload
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	return signer.SignV4(*req, w.cluster.S3AccessKey, w.cluster.S3SecretKey, "", s3Region)
}

// listUploads lists the store's ids of key's uploads in progress through
// g's S3 API (minio-go always sends a delimiter, which the door refuses).
func (w *Workload) listUploads(ctx context.Context, g *Gateway, key string) ([]string, error) {
	req := w.signedRequest(ctx, http.MethodGet, g, "", url.Values{"uploads": {""}, "prefix": {key}}, nil)
	resp, err := w.s3http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("list uploads: %s", resp.Status)
	}
	var result struct {
		Uploads []struct {
			Key      string `xml:"Key"`
			UploadID string `xml:"UploadId"`
		} `xml:"Upload"`
	}
	if err := xml.Unmarshal(data, &result); err != nil {
		return nil, err
	}
	var ids []string
	for _, u := range result.Uploads {
		if u.Key == key {
			ids = append(ids, u.UploadID)
		}
	}
	return ids, nil
}

// abortByStoreID aborts key's upload by the store's id upload, bound to
// token bound, with token in X-Fence-Token, and records it.
func (w *Workload) abortByStoreID(ctx context.Context, cs *clientState, key string, token api.Token, upload string, bound api.Token) {
	cs.ops++
	g := w.gateway(cs.rnd)
	op := Op{ID: fmt.Sprintf("%sc%d-%d-abort", strings.ReplaceAll(w.prefix, "/", "-"), cs.id, cs.ops), Client: cs.id, Process: cs.process,
		Kind: OpUploadAbort, Key: key, Token: token, Gateway: g.Name, Stale: true, Upload: upload, UploadToken: bound, ByStoreID: true}
	req := w.signedRequest(ctx, http.MethodDelete, g, key, url.Values{"uploadId": {upload}}, http.Header{api.HeaderFenceToken: {token.String()}})
	op.Call = w.history.Now()
	resp, err := w.s3http.Do(req)
	op.Return = w.history.Now()
	if err != nil {
		op.Outcome, op.Err = Ambiguous, err.Error()
		cs.process = w.history.Add(op)
		return
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		op.Outcome, op.Status = Acked, resp.StatusCode
		cs.process = w.history.Add(op)
		return
	}
	var e struct {
		Code string `xml:"Code"`
	}
	_ = xml.Unmarshal(data, &e)
	w.classifyDoorAnswer(&op, resp.StatusCode, e.Code, resp.Header, true, strings.TrimSpace(string(data)))
	if e.Code == "InvalidRequest" {
		// A token below the upload's but not below the mark: refused too.
		op.Outcome, op.Err = Refused, ""
	}
	cs.process = w.history.Add(op)
}
