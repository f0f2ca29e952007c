package tokenstore

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/textproto"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"fencegate/api"
)

// Idempotency records. Each key of each scope has one etcd key,
// <prefix>idem/<scope>/<key>, whose value is a record: in flight from the
// admission that created it until Finish, then complete with the stored
// response.
//
//   - In flight, it is bound to the admission's in-flight lease (see
//     partner.go): if the gateway dies before Finish, the record stays in
//     flight, and retries get 409, until that lease expires; retries may
//     then proceed. There is never a second forward while the first
//     request may still be upstream.
//   - Complete, it is moved to a retention lease (default 24 h) shared by
//     the records completed within a minute of each other
//     (retentionLeaseReuse): a record lives from its retention to its
//     retention plus a minute.

const (
	// defaultRetention is how long a completed record is kept when the
	// claim does not say.
	defaultRetention = 24 * time.Hour
	// retentionLeaseReuse is how long retention leases are shared.
	retentionLeaseReuse = time.Minute
)

// Record states.
const (
	stateInFlight = "in_flight"
	stateComplete = "complete"
)

// recordMagic starts every record value; the format is the magic, the
// record's metadata as one line of JSON, a newline, and the raw body.
const recordMagic = "fencegate-idem-v1\n"

// record is an idempotency record.
type record struct {
	State       string `json:"state"`
	Fingerprint string `json:"fingerprint"`
	// HeaderFingerprint is the claim's; "" in a record written before
	// headers were fingerprinted (such a record matches on Fingerprint
	// alone). Gateways from before ignore it, as they did the headers.
	HeaderFingerprint string       `json:"header_fingerprint,omitempty"`
	Token             api.Token    `json:"token"`
	Resource          api.Resource `json:"resource"`
	// Nonce tells this admission's values from every other's.
	Nonce string `json:"nonce,omitempty"`
	// The stored response, when complete.
	Status      int                 `json:"status,omitempty"`
	Header      map[string][]string `json:"header,omitempty"`
	BodyOmitted bool                `json:"body_omitted,omitempty"`
	// The body's reference (api.BodyRef), when the gateway keeps it in
	// its answer store: the record then holds no body.
	BodyID     string `json:"body_id,omitempty"`
	BodySize   int64  `json:"body_size,omitempty"`
	BodySHA256 string `json:"body_sha256,omitempty"`
	Completed  string `json:"completed,omitempty"`
	body       []byte
}

// setBodyRef records ref in r; nil records none.
func (r *record) setBodyRef(ref *api.BodyRef) {
	if ref == nil {
		return
	}
	r.BodyID, r.BodySize, r.BodySHA256 = ref.ID, ref.Size, hex.EncodeToString(ref.SHA256[:])
}

// bodyRef is the reference r records, or nil.
func (r record) bodyRef() (*api.BodyRef, error) {
	if r.BodyID == "" {
		return nil, nil
	}
	ref := &api.BodyRef{ID: r.BodyID, Size: r.BodySize}
	sum, err := hex.DecodeString(r.BodySHA256)
	if err != nil || len(sum) != len(ref.SHA256) {
		return nil, fmt.Errorf("idempotency record: body digest %q is not a SHA-256", r.BodySHA256)
	}
	copy(ref.SHA256[:], sum)
	return ref, nil
}

// encodeRecord returns r's stored form.
func encodeRecord(r record) ([]byte, error) {
	meta, err := json.Marshal(r) // escapes newlines in strings
	if err != nil {
		return nil, fmt.Errorf("encode idempotency record: %w", err)
	}
	out := make([]byte, 0, len(recordMagic)+len(meta)+1+len(r.body))
	out = append(out, recordMagic...)
	out = append(out, meta...)
	out = append(out, '\n')
	return append(out, r.body...), nil
}

// decodeRecord parses a value written by encodeRecord.
func decodeRecord(b []byte) (record, error) {
	rest, ok := bytes.CutPrefix(b, []byte(recordMagic))
	if !ok {
		return record{}, errors.New("idempotency record: unknown format")
	}
	meta, body, ok := bytes.Cut(rest, []byte{'\n'})
	if !ok {
		return record{}, errors.New("idempotency record: truncated")
	}
	var r record
	if err := json.Unmarshal(meta, &r); err != nil {
		return record{}, fmt.Errorf("idempotency record: %w", err)
	}
	if r.State != stateInFlight && r.State != stateComplete {
		return record{}, fmt.Errorf("idempotency record: unknown state %q", r.State)
	}
	r.body = body
	return r, nil
}

// existingRecord answers an admission whose idempotency key already has a
// record: a replay, or a refusal.
func existingRecord(req api.PartnerAdmission, kvs []*mvccpb.KeyValue) (admitOutcome, error) {
	c := req.Idempotency
	if len(kvs) != 1 {
		return admitOutcome{}, fmt.Errorf("admit %s: idempotency record vanished within a transaction: %w", req.Resource, api.ErrUnavailable)
	}
	r, err := decodeRecord(kvs[0].Value)
	if err != nil {
		return admitOutcome{}, fmt.Errorf("admit %s: key %q: %w", req.Resource, c.Key, err)
	}
	switch {
	case r.Fingerprint != c.Fingerprint.String():
		return admitOutcome{}, fmt.Errorf("admit %s: %w: key %q was first used for another method, path, query, body or token", req.Resource, api.ErrIdempotencyMismatch, c.Key)
	case r.HeaderFingerprint != "" && r.HeaderFingerprint != c.HeaderFingerprint.String():
		return admitOutcome{}, fmt.Errorf("admit %s: %w: key %q was first used with other forwarded headers", req.Resource, api.ErrIdempotencyMismatch, c.Key)
	case r.State == stateInFlight:
		return admitOutcome{}, fmt.Errorf("admit %s: %w: key %q", req.Resource, api.ErrIdempotencyInFlight, c.Key)
	}
	ref, err := r.bodyRef()
	if err != nil {
		return admitOutcome{}, fmt.Errorf("admit %s: key %q: %w", req.Resource, c.Key, err)
	}
	header := make(map[string][]string, len(r.Header))
	for name, values := range r.Header {
		header[textproto.CanonicalMIMEHeaderKey(name)] = values
	}
	return admitOutcome{admission: api.Admission{Replay: &api.StoredResponse{
		Status:      r.Status,
		Header:      header,
		Body:        r.body,
		BodyOmitted: r.BodyOmitted,
		BodyRef:     ref,
	}}}, nil
}
