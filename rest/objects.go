package rest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"fencegate/api"
	"fencegate/edge"
	"fencegate/fence"
)

// objectsPrefix starts every object route.
const objectsPrefix = "/v1/objects/"

// objectPath parses bucket and key from the request's decoded path (an
// object's, a ticket's or an upload's), and names the bucket's store (see
// BucketStores). Routing used the raw path; the key is everything after
// the bucket's slash, exactly as the client encoded it.
func (g *API) objectPath(r *http.Request) (api.ObjectPath, error) {
	var rest string
	ok := false
	for _, prefix := range []string{objectsPrefix, ticketsPrefix, uploadsPrefix} {
		if rest, ok = strings.CutPrefix(r.URL.Path, prefix); ok {
			break
		}
	}
	if !ok {
		return api.ObjectPath{}, fmt.Errorf("%w: not an object path", api.ErrInvalidObjectPath)
	}
	bucket, key, _ := strings.Cut(rest, "/")
	path, err := api.ParseObjectPath(bucket, key)
	if err != nil {
		return path, err
	}
	path.Store = g.engine.StoreOf(bucket)
	return path, nil
}

// clientReader is r's body to read under the edge's transfer deadlines,
// and the edge.ClientBody that sets them (nil where the connection takes
// no deadlines: the body is then r.Body itself).
func (g *API) clientReader(w http.ResponseWriter, r *http.Request) (io.Reader, *edge.ClientBody) {
	if client := g.edge.ClientBody(w, r); client != nil {
		return client, client
	}
	return r.Body, nil
}

// parseFenced runs the protocol's steps 1 and 2 for a REST request: parse
// the path and the token, and refuse a token that the cache already knows
// to be stale (fence.Engine.FastReject). Between the two it checks that the caller may
// do op to the object: before anything reaches etcd or S3, and before a
// stale answer could tell a caller that may not write the object its
// high-water mark.
func (g *API) parseFenced(r *http.Request, op edge.Operation) (fence.Request, error) {
	path, err := g.objectPath(r)
	if err != nil {
		return fence.Request{}, err
	}
	if err := g.authorize(r.Context(), op, path.Resource()); err != nil {
		return fence.Request{}, err
	}
	token, err := api.ParseTokenHeader(r.Header.Values(api.HeaderFenceToken))
	if err != nil {
		return fence.Request{}, err
	}
	return g.engine.FastReject(r.Context(), path, token)
}

// putObject is the fenced write of the REST API: parse, fast reject, then
// the engine's Put (observe, fence check, conditional write).
func (g *API) putObject(w http.ResponseWriter, r *http.Request) {
	fr, err := g.parseFenced(r, edge.OpWrite)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	if g.putInParts(w, r, fr) { // bodies above Config.MultipartThreshold
		return
	}
	body, err := g.readBody(w, r)
	if errors.Is(err, api.ErrGatewayBusy) {
		// The rest of the body is not read: close the connection after
		// the answer rather than wait for it (net/http would otherwise
		// try to read up to 256 KiB of it before answering).
		w.Header().Set("Connection", "close")
	}
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	defer body.Release()
	res, err := g.engine.Put(r.Context(), fr, body, r.Header.Get("Content-Type"), api.ObjectMetadata{})
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	answerWrite(w, res)
}

// answerWrite answers an accepted PUT, whole or in parts: 201 when it
// created the object, else 200, with the object's new ETag and the token
// it records, and the result as JSON.
func answerWrite(w http.ResponseWriter, res fence.WriteResult) {
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
	}
	w.Header().Set("ETag", res.ETag)
	w.Header().Set(api.HeaderFenceToken, res.Token.String())
	writeJSON(w, status, res)
}

// deleteObject is the fenced delete of the REST API: parse, fast reject,
// then the engine's Delete (observe, fence check, conditional delete; see
// fence.Engine.Delete for the mark a delete leaves, and for a delete of an
// absent object).
func (g *API) deleteObject(w http.ResponseWriter, r *http.Request) {
	fr, err := g.parseFenced(r, edge.OpDelete)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	if err := g.engine.Delete(r.Context(), fr); err != nil {
		g.writeError(w, r, err)
		return
	}
	w.Header().Set(api.HeaderFenceToken, fr.Token.String())
	w.WriteHeader(http.StatusNoContent)
}

// getObject passes GET and HEAD through, with the object's recorded token
// in X-Fence-Token, and the client's Range and preconditions as readInput
// validates them: S3's 206, 304, 412 and 416 reach the client.
func (g *API) getObject(w http.ResponseWriter, r *http.Request) {
	path, err := g.objectPath(r)
	if err == nil {
		err = g.authorize(r.Context(), edge.OpRead, path.Resource())
	}
	var in api.GetObjectInput
	if err == nil {
		in, err = edge.ReadInput(r, path)
	}
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	obj, err := g.engine.ReadObject(r.Context(), in, r.Method == http.MethodHead)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	if obj.Body != nil {
		defer obj.Body.Close()
	}
	w.WriteHeader(setObjectHeaders(w.Header(), obj))
	if obj.Body != nil {
		if _, err := g.edge.CopyToClient(w, obj.Body); err != nil {
			g.edge.Logger(r.Context()).Warn("object read interrupted", "bucket", path.Bucket, "key", path.Key, "err", err)
		}
	}
}

// getFence answers a resource's current high-water mark, read
// linearizably.
func (g *API) getFence(w http.ResponseWriter, r *http.Request) {
	resource, _ := strings.CutPrefix(r.URL.Path, "/v1/fences/")
	if resource == "" || len(resource) > maxResourceBytes {
		g.writeError(w, r, fmt.Errorf("%w: resource name must be 1 to %d bytes", api.ErrInvalidRequest, maxResourceBytes))
		return
	}
	if err := g.authorize(r.Context(), edge.OpRead, api.Resource(resource)); err != nil {
		g.writeError(w, r, err)
		return
	}
	hwm, err := g.engine.HighWaterMark(r.Context(), api.Resource(resource))
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Fence{Resource: api.Resource(resource), HighWaterMark: hwm})
}

// maxResourceBytes bounds resource names: "gcs/" (or "s3/"), a bucket,
// "/", a key.
const maxResourceBytes = 4 + 63 + 1 + api.MaxKeyBytes

// readBody reads a REST PUT's body (see fence.Engine.ReadBody) under the
// transfer deadlines (see edge.ClientBody): a sender that stalls is cut off.
// The caller releases the body when the request ends.
func (g *API) readBody(w http.ResponseWriter, r *http.Request) (*fence.Body, error) {
	if r.ContentLength > g.cfg.MaxBodyBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", api.ErrBodyTooLarge, r.ContentLength, g.cfg.MaxBodyBytes)
	}
	from, client := g.clientReader(w, r)
	return g.engine.ReadBody(from, r.ContentLength, client)
}
