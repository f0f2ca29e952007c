package rest

import (
	"fmt"
	"net/http"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/internal/jsonbody"
)

// The routes of a multipart upload, such as a multipart ticket's
// (POST /v1/tickets with part_size), whose parts the client sent straight
// to the store:
//
//	POST   /v1/uploads/{bucket}/{key}               {"upload_id", "parts"} -> 201 / 200, the write's result
//	DELETE /v1/uploads/{bucket}/{key}?upload_id=ID  -> 204
//
// Both are the engine's (fence.Engine.CompleteUpload, AbortUpload), as
// the S3 API's CompleteMultipartUpload and AbortMultipartUpload are: the
// completion observes the object and checks the fence again, so parts
// sent under a token that went stale never become the object. The key is
// the rest of the path, slashes and all, so nothing can follow it: the
// route is a path of its own rather than /v1/tickets/{bucket}/{key}/complete,
// which would be the ticket route of key "{key}/complete" too.

// uploadsPrefix starts the upload routes.
const uploadsPrefix = "/v1/uploads/"

// maxCompletionBytes bounds a completion's JSON body. A part takes about
// 67 bytes (`{"part_number":10000,"etag":"\"<32 hex digits>\""},`), so
// api.MaxParts of them take 670 KB (TestTicketAtMostParts measures it);
// the limit leaves three times that for white space and longer ETags.
const maxCompletionBytes = 2 << 20

// completeUpload completes a fenced multipart upload from the parts the
// body names, with the fence check of a PUT (fence.Engine.CompleteUpload),
// and answers as a PUT does (answerWrite). A stale upload is refused
// (409) and aborted; any other refusal leaves the upload for the client
// to complete again or abort.
func (g *API) completeUpload(w http.ResponseWriter, r *http.Request) {
	path, token, err := g.parseWrite(r)
	var body api.UploadCompletion
	if err == nil {
		body, err = g.readCompletion(w, r)
	}
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	parts := make([]api.Part, len(body.Parts))
	for i, p := range body.Parts {
		parts[i] = api.Part{Number: p.Number, ETag: p.ETag}
	}
	res, err := g.engine.CompleteUpload(r.Context(), path, body.UploadID, token, parts)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	answerWrite(w, res)
}

// abortUpload aborts a fenced multipart upload (fence.Engine.AbortUpload):
// 204, or 404 for an id that names no upload of the key. An abort writes
// no object, so its creator may abort it even once its token is stale.
// The id is a query parameter, as a DELETE has no body to carry it.
func (g *API) abortUpload(w http.ResponseWriter, r *http.Request) {
	path, token, err := g.parseWrite(r)
	var id string
	if err == nil {
		id, err = uploadIDParam(r)
	}
	if err == nil {
		err = g.engine.AbortUpload(r.Context(), path, id, token)
	}
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	w.Header().Set(api.HeaderFenceToken, token.String())
	w.WriteHeader(http.StatusNoContent)
}

// uploadIDParam returns the upload_id query parameter: exactly one, not
// empty (api.ErrInvalidRequest).
func uploadIDParam(r *http.Request) (string, error) {
	values := r.URL.Query()["upload_id"]
	if len(values) != 1 || values[0] == "" {
		return "", fmt.Errorf("%w: one upload_id query parameter is required, the upload's id", api.ErrInvalidRequest)
	}
	return values[0], nil
}

// parseWrite parses what a request that writes an object names, in the
// order a PUT's is parsed: the path, the caller's write access, and the
// token, which it must send (api.ErrMissingToken).
func (g *API) parseWrite(r *http.Request) (api.ObjectPath, api.Token, error) {
	path, err := g.objectPath(r)
	if err != nil {
		return api.ObjectPath{}, 0, err
	}
	if err := g.authorize(r.Context(), edge.OpWrite, path.Resource()); err != nil {
		return api.ObjectPath{}, 0, err
	}
	token, err := api.ParseTokenHeader(r.Header.Values(api.HeaderFenceToken))
	if err != nil {
		return api.ObjectPath{}, 0, err
	}
	if token == 0 {
		return api.ObjectPath{}, 0, api.ErrMissingToken
	}
	return path, token, nil
}

// readCompletion reads a completion's body, of at most
// maxCompletionBytes (api.ErrBodyTooLarge beyond), under the transfer
// deadlines and into memory reserved from the budget of buffered bodies,
// as a PUT's (fence.Engine.BufferWhole): a completion is read whole
// before it is parsed, and up to 2 MiB of it, many at once, would
// otherwise be memory that no limit counts. The memory is given back
// once the body is decoded (decodeCompletion).
func (g *API) readCompletion(w http.ResponseWriter, r *http.Request) (api.UploadCompletion, error) {
	tooLarge := func(n int64) (api.UploadCompletion, error) {
		return api.UploadCompletion{}, fmt.Errorf("%w: a completion of %d bytes or more, limit %d (%d parts)", api.ErrBodyTooLarge, n, maxCompletionBytes, api.MaxParts)
	}
	if r.ContentLength > maxCompletionBytes {
		return tooLarge(r.ContentLength)
	}
	from, client := g.clientReader(w, r)
	held, err := g.engine.BufferWhole(from, r.ContentLength, maxCompletionBytes, client)
	if err != nil {
		return api.UploadCompletion{}, err
	}
	defer held.Release()
	if held.Size() > maxCompletionBytes {
		return tooLarge(held.Size())
	}
	return decodeCompletion(held.Bytes())
}

// decodeCompletion decodes a completion's body: one JSON object of known
// members (jsonbody.Decode) that validates (api.ErrInvalidRequest
// otherwise).
func decodeCompletion(data []byte) (api.UploadCompletion, error) {
	var body api.UploadCompletion
	if err := jsonbody.Decode(data, &body); err != nil {
		return api.UploadCompletion{}, fmt.Errorf("%w: completion: one JSON object, {\"upload_id\": ..., \"parts\": [...]}: %w", api.ErrInvalidRequest, err)
	}
	return body, body.Validate()
}
