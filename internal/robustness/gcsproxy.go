package robustness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"time"

	"fencegate/api"
)

// The GCS side of the harness: a StoreProxy in front of fake-gcs-server
// that records the gateways' object writes as the GCS JSON API carries
// them (a multipart upload: a JSON part with the object's name, content
// type and metadata, then the bytes; its precondition in the query,
// ifGenerationMatch), and a reader of the final objects that is not the
// gateway's client library.

// NewGCSProxy starts one listener on 127.0.0.1 for each gateway name, all
// forwarding to upstream, the base URL of a GCS JSON API server
// (http://host:port). Close it.
func NewGCSProxy(upstream string, gateways []string, seed uint64) (*StoreProxy, error) {
	return newStoreProxy(upstream, gateways, seed, (*StoreProxy).gcsHandler)
}

// gcsUpload is what the proxy reads from a multipart upload.
type gcsUpload struct {
	key         string // "bucket/name"
	token       api.Token
	op          string
	condition   string
	contentType string
	bodyETag    string
}

// gcsObjectPath returns the bucket and object of a JSON API object path,
// "/storage/v1/b/{bucket}/o/{object}" (the object unescaped), or false.
func gcsObjectPath(path string) (bucket, object string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/storage/v1/b/")
	if !ok {
		return "", "", false
	}
	bucket, object, ok = strings.Cut(rest, "/o/")
	return bucket, object, ok && bucket != "" && object != ""
}

// isGCSUpload reports whether r uploads an object: a POST to
// /upload/storage/v1/b/{bucket}/o.
func isGCSUpload(r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, "/upload/storage/v1/b/")
	return r.Method == http.MethodPost && ok && strings.HasSuffix(rest, "/o") && len(rest) > len("/o")
}

// gcsCondition describes an upload's or a delete's precondition as sent:
// "ifGenerationMatch=N", or "" for none.
func gcsCondition(q url.Values) string {
	if vs, ok := q["ifGenerationMatch"]; ok {
		return "ifGenerationMatch=" + strings.Join(vs, ",")
	}
	return ""
}

// parseGCSUpload reads a multipart upload (uploadType=multipart): its
// JSON part names the object and carries its metadata, the next part is
// the object's bytes. Other upload types are an error: the gateway sends
// each write in one request.
func parseGCSUpload(r *http.Request, body []byte) (gcsUpload, error) {
	bucket := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/upload/storage/v1/b/"), "/o")
	q := r.URL.Query()
	if t := q.Get("uploadType"); t != "multipart" {
		return gcsUpload{}, fmt.Errorf("upload type %q, want multipart", t)
	}
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") {
		return gcsUpload{}, fmt.Errorf("content type %q, want multipart/related", r.Header.Get("Content-Type"))
	}
	parts := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	var meta struct {
		Name        string            `json:"name"`
		ContentType string            `json:"contentType"`
		Metadata    map[string]string `json:"metadata"`
	}
	part, err := parts.NextPart()
	if err != nil {
		return gcsUpload{}, fmt.Errorf("metadata part: %w", err)
	}
	if err := json.NewDecoder(part).Decode(&meta); err != nil {
		return gcsUpload{}, fmt.Errorf("metadata part: %w", err)
	}
	part, err = parts.NextPart()
	if err != nil {
		return gcsUpload{}, fmt.Errorf("media part: %w", err)
	}
	media, err := io.ReadAll(part)
	if err != nil {
		return gcsUpload{}, fmt.Errorf("media part: %w", err)
	}
	name := meta.Name
	if name == "" {
		name = q.Get("name")
	}
	contentType := meta.ContentType
	if contentType == "" {
		contentType = part.Header.Get("Content-Type")
	}
	token, _ := api.ParseToken(meta.Metadata[api.MetadataFenceToken])
	return gcsUpload{key: bucket + "/" + name, token: token, op: opOf(media, contentType), condition: gcsCondition(q),
		contentType: contentType, bodyETag: bodyETag(media)}, nil
}

// gcsGeneration returns the generation of a JSON API object resource as
// the gateway names it: its decimal digits, quoted.
func gcsGeneration(resource []byte) (string, error) {
	var obj struct {
		Generation json.Number `json:"generation"`
	}
	dec := json.NewDecoder(bytes.NewReader(resource))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		return "", err
	}
	if obj.Generation == "" {
		return "", errors.New("no generation")
	}
	return `"` + obj.Generation.String() + `"`, nil
}

func (p *StoreProxy) gcsHandler(gateway string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bucket, object, ok := gcsObjectPath(r.URL.Path); ok && r.Method == http.MethodDelete {
			rec := StoreWrite{Gateway: gateway, Key: bucket + "/" + object, Deleted: true, Condition: gcsCondition(r.URL.Query()), At: time.Now()}
			p.forwardRecorded(w, r, rec, nil, gcsDialect)
			return
		}
		if !isGCSUpload(r) {
			p.forward(w, r, nil)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			writeGCSError(w, http.StatusBadRequest, "gcs proxy: reading body: "+err.Error())
			return
		}
		up, err := parseGCSUpload(r, body)
		if err != nil {
			// Not a write the harness can record: the run must not pass
			// over it.
			writeGCSError(w, http.StatusNotImplemented, "gcs proxy: "+err.Error())
			return
		}
		rec := StoreWrite{Gateway: gateway, Key: up.key, Token: up.token, Op: up.op, Condition: up.condition, BodyETag: up.bodyETag, Fault: p.drawFault(), At: time.Now()}
		p.forwardRecorded(w, r, rec, body, gcsDialect)
	})
}

// gcsDialect answers as GCS's JSON API does, and names a committed
// version by the generation in the object resource it returns. (The
// suite's GCS histories send no deletes: fake-gcs-server v1.56.1 ignores
// their ifGenerationMatch.)
var gcsDialect = storeDialect{
	name: "gcs",
	fail: writeGCSError,
	version: func(_ *http.Response, body []byte) string {
		generation, err := gcsGeneration(body)
		if err != nil {
			return "unknown generation: " + err.Error()
		}
		return generation
	},
}

// writeGCSError answers a JSON API error.
func writeGCSError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"code": status, "message": message, "errors": []map[string]string{{"message": message, "reason": "backendError"}},
	}})
	_, _ = w.Write(body)
}

// gcsObjectReader reads objects straight from fake-gcs-server's JSON API
// with plain HTTP requests: not the client library the gateways write
// with, and not through the proxy.
type gcsObjectReader struct {
	base   string // http://host:port
	bucket string
	http   *http.Client
}

// read reads key: its attributes (content type, metadata, generation),
// then that generation's bytes.
func (g *gcsObjectReader) read(ctx context.Context, key string) (ObjectState, error) {
	objectURL := g.base + "/storage/v1/b/" + url.PathEscape(g.bucket) + "/o/" + url.PathEscape(key)
	attrs, status, err := g.get(ctx, objectURL)
	if status == http.StatusNotFound {
		return ObjectState{}, nil
	}
	if err != nil {
		return ObjectState{}, fmt.Errorf("read %s: %w", key, err)
	}
	var meta struct {
		ContentType string            `json:"contentType"`
		Metadata    map[string]string `json:"metadata"`
		Generation  json.Number       `json:"generation"`
	}
	if err := json.Unmarshal(attrs, &meta); err != nil {
		return ObjectState{}, fmt.Errorf("read %s: %w", key, err)
	}
	body, _, err := g.get(ctx, objectURL+"?alt=media&generation="+meta.Generation.String())
	if err != nil {
		return ObjectState{}, fmt.Errorf("read %s: %w", key, err)
	}
	token, _ := api.ParseToken(meta.Metadata[api.MetadataFenceToken])
	return ObjectState{Exists: true, Op: opOf(body, meta.ContentType), Token: token}, nil
}

// get GETs u and returns its body when the answer is 200.
func (g *gcsObjectReader) get(ctx context.Context, u string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, resp.StatusCode, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return body, resp.StatusCode, nil
}
