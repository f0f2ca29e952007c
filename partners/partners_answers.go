package partners

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"fencegate/api"
)

// Stored answers' bodies. etcd keeps what must be linearizable about an
// idempotency key: its record's state, fingerprint, token, status,
// headers (bounded: maxStoredHeaderBytes), and a body of at most
// maxInlineAnswerBytes. A larger body goes to the answer store
// (AnswerStore, an S3 prefix of the gateway's own), and the record keeps
// its size and SHA-256 (api.BodyRef).
//
// The body is written before the record says complete (Finish), so a
// complete record never names a body that was not written; if the write
// fails, the record is completed with the body omitted, since the partner
// has acted and the key must never be forwarded again. A replay reads the
// body back and checks its size and digest. A body that is gone (expired
// by the bucket's lifecycle rule, deleted) or is not the one stored is
// never replayed and never forwarded again: the replay has the stored
// status and headers, no body, and Idempotent-Body-Omitted: true, as for
// answers larger than the route's max_stored_response_bytes.

// maxInlineAnswerBytes is the largest body kept in the etcd record
// itself. A record's metadata takes about 300 to 900 bytes (fingerprint,
// nonce, token, resource, headers), so bodies up to 512 bytes at most
// double it, while the answers that fit (an acknowledgement, a small JSON
// object, the gateway's own problem+json 502 or 504) cost no answer
// store round trip on the way out or on replay. Every larger body costs
// etcd nothing but its 100-byte reference.
const maxInlineAnswerBytes = 512

// answerStoreTimeout bounds each answer store request. The in-flight
// marker is held that much longer (partnerHold), so that the body's
// write, which comes after the call, ends before the marker may expire.
const answerStoreTimeout = 3 * time.Second

// answerWriteTime is how much of the marker's hold the answer store's
// write takes after the call: answerStoreTimeout with an answer store,
// nothing without.
func (h *API) answerWriteTime() time.Duration {
	if h.answers == nil {
		return 0
	}
	return answerStoreTimeout
}

// partnerHold is the admission's Hold for route: the call's timeout, and
// the answer store's write after it.
func (h *API) partnerHold(route *partnerRoute) time.Duration {
	return route.Timeout + h.answerWriteTime()
}

// answerName names the body of the answer of admission id under an
// idempotency key: the SHA-256 of the scope and key, then the id, so
// that every gateway finds it from the record, and an admission after
// the record expired never reuses an earlier one's name.
func answerName(scope string, key api.IdempotencyKey, id string) string {
	sum := sha256.Sum256([]byte(scope + "\x00" + string(key)))
	return hex.EncodeToString(sum[:]) + "/" + id
}

// storeBody returns stored with a body larger than maxInlineAnswerBytes
// moved to the answer store, and the name it has there ("" when nothing
// was written). Without an answer store, or when the write fails, the
// body is omitted instead (the failure is logged).
func (h *API) storeBody(ctx context.Context, pr partnerRequest, scope string, adm api.Admission, stored *api.StoredResponse) (*api.StoredResponse, string) {
	if len(stored.Body) <= maxInlineAnswerBytes {
		return stored, ""
	}
	out := *stored
	out.Body = nil
	if h.answers == nil || adm.ID == "" {
		out.BodyOmitted = true
		return &out, ""
	}
	name := answerName(scope, pr.key, adm.ID)
	wctx, cancel := context.WithTimeout(ctx, answerStoreTimeout)
	defer cancel()
	if err := h.answers.PutAnswer(wctx, name, stored.Body); err != nil {
		h.edge.Logger(ctx).Warn("answer body not stored: replays will omit it", "route", pr.route.Name, "resource", pr.resource, "err", err)
		out.BodyOmitted = true
		return &out, ""
	}
	out.BodyRef = &api.BodyRef{ID: adm.ID, Size: int64(len(stored.Body)), SHA256: sha256.Sum256(stored.Body)}
	return &out, name
}

// replayBody returns the stored response s with its body read back from
// the answer store, when s.BodyRef names one there. A body that is gone,
// or whose size or digest is not the reference's, makes the body omitted
// (logged); a store that cannot answer now is api.ErrUnavailable: nothing
// is forwarded, and a retry may find the body.
func (h *API) replayBody(ctx context.Context, pr partnerRequest, scope string, s *api.StoredResponse) (*api.StoredResponse, error) {
	ref := s.BodyRef
	if ref == nil {
		return s, nil
	}
	out := *s
	out.BodyRef = nil
	log := h.edge.Logger(ctx)
	if h.answers == nil {
		log.Warn("stored answer's body is in an answer store, and none is configured: replayed without it", "route", pr.route.Name)
		out.BodyOmitted = true
		return &out, nil
	}
	rctx, cancel := context.WithTimeout(ctx, answerStoreTimeout)
	defer cancel()
	body, err := h.answers.GetAnswer(rctx, answerName(scope, pr.key, ref.ID))
	switch {
	case errors.Is(err, api.ErrNotFound):
		log.Warn("stored answer's body is gone from the answer store: replayed without it", "route", pr.route.Name, "resource", pr.resource)
		out.BodyOmitted = true
	case err != nil:
		return nil, fmt.Errorf("partner %s: %w: the answer store could not return the stored answer's body: %w", pr.route.Name, api.ErrUnavailable, err)
	case int64(len(body)) != ref.Size || sha256.Sum256(body) != ref.SHA256:
		log.Warn("stored answer's body in the answer store is not the one stored: replayed without it", "route", pr.route.Name, "resource", pr.resource, "size", len(body), "want_size", ref.Size)
		out.BodyOmitted = true
	default:
		out.Body = bytes.Clone(body)
	}
	return &out, nil
}
