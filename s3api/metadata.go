package s3api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"fencegate/api"
)

// An object's metadata through the door: what a write sends
// (x-amz-meta-NAME headers, Cache-Control, Content-Disposition,
// Content-Encoding, Content-Language, Expires) is validated here, before
// anything reaches etcd or S3, stored with the object, and answered on
// GET and HEAD as S3 answers it. What a copy takes from its source
// (CopyObject with COPY) is held to the same rules before the copy's
// fence check: the source may have been written to S3 past the door, and
// the copy's token entry may take it over the limit.
//
// The rules, S3's where S3 has one, and stricter where a value would
// otherwise reach the upstream request or a reader's headers unchecked:
//
//   - User metadata is at most maxUserMetadataBytes, counted as S3 counts
//     it: the bytes of every name (without x-amz-meta-) and value, the
//     token's own fence-token entry included (MetadataTooLarge).
//   - Names are HTTP token characters (RFC 9110 section 5.6.2), stored
//     lower case, in the headers or the query (a presigned URL carries
//     what it signed there) but not both; a name sent more than once is
//     stored with its values joined with "," (sentMetadata), as S3 does.
//   - Values, of user metadata and of the standard headers, are printable
//     US-ASCII (0x20 to 0x7E): no control characters (a CR or LF would
//     split the upstream request's headers; a query parameter can carry
//     them), and no raw non-ASCII bytes, which S3 servers sign, store and
//     answer differently. Text beyond ASCII is sent RFC 2047-encoded
//     (=?UTF-8?B?...?=), as S3 answers it, and stored as sent.
//   - Expires is an HTTP date.
//   - Content-Encoding loses its aws-chunked coding, as on S3: it names
//     how the request's body was framed, not the object.

// maxUserMetadataBytes is S3's limit on an object's user metadata.
const maxUserMetadataBytes = 2 << 10

// errMetadataTooLarge is user metadata above maxUserMetadataBytes.
var errMetadataTooLarge = errors.New("metadata too large")

// metadataTooLarge is the refusal of user metadata of size bytes.
func metadataTooLarge(what string, size int) error {
	return &sizeError{class: errMetadataTooLarge, what: what, size: size, limit: maxUserMetadataBytes, answerSize: true}
}

// userMetadataPrefix starts the name of each user metadata header or
// query parameter, compared without case.
const userMetadataPrefix = "x-amz-meta-"

// objectMetadata reads and validates the metadata of a write (PutObject,
// CopyObject with REPLACE, CreateMultipartUpload) from r, for an object
// that records token. Its errors are S3's: MetadataTooLarge,
// InvalidArgument; Expires and Content-Encoding in a GCS bucket are
// NotImplemented (storeKeeps).
func objectMetadata(r *http.Request, query url.Values, token api.Token, store string) (api.ObjectMetadata, error) {
	var m api.ObjectMetadata
	tokenInMetadata := false
	// In a fixed order, so that the error a request gets does not vary.
	for _, params := range []map[string][]string{r.Header, query} {
		if only, sent := onlyTokenMetadata(params); only {
			// Nothing to store from params (the common write: the
			// token alone, or no metadata at all); fenceToken reads
			// the token.
			tokenInMetadata = tokenInMetadata || sent
			continue
		}
		sent := sentMetadata(params)
		for _, name := range sortedKeys(sent) {
			switch name {
			case api.MetadataFenceToken:
				tokenInMetadata = true
				continue // the token's, read by fenceToken
			case metadataTokenHidden:
				return api.ObjectMetadata{}, fmt.Errorf("%w: x-amz-meta-%s is the gateway's own: do not send it", errInvalidArgument, metadataTokenHidden)
			}
			if _, dup := m.User[name]; dup {
				return api.ObjectMetadata{}, fmt.Errorf("%w: x-amz-meta-%s is sent in the headers and in the query: send it in one", errInvalidArgument, api.Truncate(name, 80))
			}
			if m.User == nil {
				m.User = make(map[string]string)
			}
			m.User[name] = sent[name]
		}
	}
	for _, s := range api.MetadataHeaders {
		values := r.Header.Values(s.Name)
		if s.Name == "Content-Encoding" {
			values = withoutAWSChunked(values)
		}
		switch {
		case len(values) == 0:
			continue
		case len(values) > 1:
			return api.ObjectMetadata{}, fmt.Errorf("%w: %s is sent more than once: send it once", errInvalidArgument, s.Name)
		}
		*s.Field(&m) = values[0]
	}
	if _, header := r.Header[api.HeaderFenceToken]; header && !tokenInMetadata {
		if m.User == nil {
			m.User = make(map[string]string, 1)
		}
		m.User[metadataTokenHidden] = "1"
	}
	if err := checkStored(m, token, store); err != nil {
		return api.ObjectMetadata{}, err
	}
	return m, nil
}

// sentMetadata is the user metadata in params (a request's headers or
// query) by lower-case name, as S3 stores it: the values of a name sent
// more than once (x-amz-meta-foo twice, or as x-amz-meta-Foo and
// x-amz-meta-foo) joined with ",", in the order they came (names that
// differ in case, which only a query keeps apart, in the order of their
// spelling). The fencing token is the one name this does not apply to:
// fenceToken refuses it sent twice.
func sentMetadata(params map[string][]string) map[string]string {
	var sent map[string]string
	for _, spelled := range metadataNames(params) {
		name := strings.ToLower(spelled[len(userMetadataPrefix):])
		value := strings.Join(params[spelled], ",")
		if sent == nil {
			sent = make(map[string]string)
		}
		if before, ok := sent[name]; ok {
			value = before + "," + value
		}
		sent[name] = value
	}
	return sent
}

// onlyTokenMetadata reports whether the only user metadata in params (a
// request's headers or query) is the token's, x-amz-meta-fence-token in
// any case, or there is none, and whether the token's is there: what
// sentMetadata would answer with a map of at most the token's entry,
// without building it. A name beyond ASCII is left to sentMetadata.
func onlyTokenMetadata(params map[string][]string) (only, token bool) {
	for name := range params {
		if _, ok := cutPrefixFold(name, userMetadataPrefix); !ok {
			continue
		}
		if hasNonASCII(name) || !strings.EqualFold(name, userMetadataPrefix+api.MetadataFenceToken) {
			return false, false
		}
		token = true
	}
	return true, token
}

// hasNonASCII reports whether s holds a byte beyond ASCII.
func hasNonASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return true
		}
	}
	return false
}

// checkSentMetadataSize refuses the user metadata that a CopyObject
// that copies its source's (x-amz-metadata-directive COPY) sends, which
// the copy does not store, when it is above maxUserMetadataBytes: S3
// refuses it whatever the directive.
func checkSentMetadataSize(r *http.Request, query url.Values) error {
	size := 0
	for _, params := range []map[string][]string{r.Header, query} {
		for name, value := range sentMetadata(params) {
			size += len(name) + len(value)
		}
	}
	if size > maxUserMetadataBytes {
		return metadataTooLarge("the user metadata sent", size)
	}
	return nil
}

// metadataTokenHidden is the user metadata entry that an object written
// through the door with its token in X-Fence-Token alone (not in
// x-amz-meta-fence-token) is stored with, so that its reads answer the
// metadata its writer sent and nothing else. Every object records its
// token as x-amz-meta-fence-token in the store, however it was sent
// (other gateways and the evictor read it there), and every read answers
// it in X-Fence-Token; x-amz-meta-fence-token is answered too unless the
// object holds this entry: objects whose writer sent the token there,
// and those written by the REST API or straight to the store. The entry
// is never answered (setMetadataHeaders), refused in a write's metadata,
// copied with the rest of a source's metadata (CopyObject with COPY),
// and counted in the 2 KiB, as the store counts it.
const metadataTokenHidden = "fence-token-hidden"

// checkStored holds m, the metadata that an object recording token will
// be stored with, to the rules above: whether a request sent it
// (objectMetadata) or a copy takes it from its source (CopyObject with
// COPY), which may have been written to S3 past the door. The token's
// own entry is counted as the store will write it, from token; one in
// m.User is not stored (the store writes the token's). It checks in a
// fixed order, so that the error a request gets does not vary.
func checkStored(m api.ObjectMetadata, token api.Token, store string) error {
	size := len(api.MetadataFenceToken) + len(token.String())
	for _, name := range sortedKeys(m.User) {
		if strings.EqualFold(name, api.MetadataFenceToken) {
			continue
		}
		if name == "" || !isToken(name) || name != strings.ToLower(name) {
			return fmt.Errorf("%w: user metadata name %q is not a lower-case HTTP token", errInvalidArgument, api.Truncate(name, 80))
		}
		value := m.User[name]
		if err := checkMetadataValue("x-amz-meta-"+name, value); err != nil {
			return err
		}
		size += len(name) + len(value)
	}
	if size > maxUserMetadataBytes {
		return metadataTooLarge("the user metadata (names and values, fence-token included)", size)
	}
	for _, s := range api.MetadataHeaders {
		if err := checkMetadataValue(s.Name, *s.Field(&m)); err != nil {
			return err
		}
	}
	if m.Expires != "" {
		if _, err := http.ParseTime(m.Expires); err != nil {
			return fmt.Errorf("%w: Expires %q is not an HTTP date", errInvalidArgument, api.Truncate(m.Expires, 80))
		}
	}
	return storeKeeps(store, m)
}

// storeKeeps refuses metadata that the object's store cannot keep as S3
// does: GCS has no Expires, and serves an object with a Content-Encoding
// decoded (backends/gcs refuses both again, before sending).
func storeKeeps(store string, m api.ObjectMetadata) error {
	if store != api.StoreGCS {
		return nil
	}
	switch {
	case m.Expires != "":
		return fmt.Errorf("%w: Expires on an object in GCS, which keeps none", errNotImplemented)
	case m.ContentEncoding != "":
		return fmt.Errorf("%w: Content-Encoding on an object in GCS, which would serve it decoded", errNotImplemented)
	}
	return nil
}

// checkMetadataValue refuses a value that is not printable US-ASCII.
func checkMetadataValue(what, v string) error {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= 0x80:
			return fmt.Errorf("%w: %s holds a byte beyond ASCII: encode such text as RFC 2047 (=?UTF-8?B?...?=)", errInvalidArgument, what)
		case c < 0x20 || c == 0x7f:
			return fmt.Errorf("%w: %s holds a control character (0x%02x)", errInvalidArgument, what, c)
		}
	}
	return nil
}

// withoutAWSChunked is Content-Encoding without aws-chunked, the framing
// of the request's body: "aws-chunked,gzip" is "gzip", "aws-chunked"
// alone is none.
func withoutAWSChunked(values []string) []string {
	var out []string
	for _, v := range values {
		var kept []string
		for _, coding := range strings.Split(v, ",") {
			if c := strings.TrimSpace(coding); c != "" && !strings.EqualFold(c, "aws-chunked") {
				kept = append(kept, c)
			}
		}
		if len(kept) > 0 {
			out = append(out, strings.Join(kept, ","))
		}
	}
	return out
}

// setMetadataHeaders writes m, of an object that records token, to the
// headers of a read's answer, as S3 answers them: x-amz-meta-NAME with
// the name in lower case (set as the map's key, which net/http sends as
// it is: http.Header.Set would send X-Amz-Meta-Name, and boto3 and
// aws-cli would show the key as Name), and the standard headers. The
// token is x-amz-meta-fence-token too, unless the object's writer sent
// it in X-Fence-Token alone (metadataTokenHidden).
func setMetadataHeaders(h http.Header, m api.ObjectMetadata, token api.Token) {
	for name, value := range m.User {
		if name == metadataTokenHidden || name == api.MetadataFenceToken {
			continue
		}
		h[userMetadataPrefix+name] = []string{value}
	}
	if _, hidden := m.User[metadataTokenHidden]; !hidden && token != 0 {
		h[userMetadataPrefix+api.MetadataFenceToken] = []string{token.String()}
	}
	for _, s := range api.MetadataHeaders {
		if v := *s.Field(&m); v != "" {
			h[s.Name] = []string{v}
		}
	}
}

// isToken reports whether s is made of HTTP token characters.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// cutPrefixFold is strings.CutPrefix without case.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return s, false
	}
	return s[len(prefix):], true
}

// metadataNames returns the names in params (a request's headers or
// query) that carry user metadata (x-amz-meta-*, in any case), sorted.
func metadataNames(params map[string][]string) []string {
	var names []string
	for name := range params {
		if _, ok := cutPrefixFold(name, userMetadataPrefix); ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// sortedKeys are m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
