package config

// The auth section of the config file: identities, what each may do, and
// the API keys (stored as SHA-256 hashes) and client certificates that
// authenticate as each.

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"fencegate/gateway"
)

// identityNamePattern is the syntax of an identity's name, which logs and
// audit lines show and idempotency keys are scoped by.
var identityNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// grantOperations are the operations a grant may name.
var grantOperations = []gateway.Operation{gateway.OpRead, gateway.OpWrite, gateway.OpDelete, gateway.OpLock, gateway.OpAdmin}

// apiKeyHashPrefix starts a hashed API key in the config file.
const apiKeyHashPrefix = "sha256:"

// authState is what the auth section's checks remember across identities.
type authState struct {
	names map[string]int   // identity name: line
	keys  map[[32]byte]int // key hash: line
	cns   map[string]int   // client certificate common name: line
	auth  gateway.Auth     // what is decoded so far
}

// auth decodes the auth section.
func (d *decoder) auth(n *yaml.Node, path string) {
	st := &authState{names: map[string]int{}, keys: map[[32]byte]int{}, cns: map[string]int{}}
	errsNow := len(d.errs)
	var identitiesSeen bool
	d.fields(n, path, []field{
		{"identities", func(d *decoder, n *yaml.Node, path string) {
			identitiesSeen = true
			items, ok := d.list(n, path, "a list of identities")
			if !ok {
				return
			}
			if len(items) == 0 {
				d.errorf(n, path, "empty; want at least one identity")
				return
			}
			for i, item := range items {
				d.identity(st, item, fmt.Sprintf("%s[%d]", path, i))
			}
		}},
	})
	if !identitiesSeen && n.Kind == yaml.MappingNode {
		d.errorf(n, joinPath(path, "identities"), "missing: auth needs at least one identity")
	}
	if len(d.errs) > errsNow {
		return
	}
	// The gateway checks the same rules; this only catches a
	// disagreement between the two.
	if err := st.auth.Validate(); err != nil {
		d.errorf(n, path, "%v", err)
		return
	}
	d.out.auth = &st.auth
}

// identity decodes one identity, with its grants, keys and certificates.
func (d *decoder) identity(st *authState, n *yaml.Node, path string) {
	var (
		id          gateway.Identity
		keys        []gateway.APIKey
		certs       []gateway.ClientCert
		seen        = map[string]bool{}
		credentials = 0
	)
	d.fields(n, path, []field{
		{"name", func(d *decoder, n *yaml.Node, path string) {
			seen["name"] = true
			s, ok := d.scalar(n, path, "an identity name")
			if !ok {
				return
			}
			if !identityNamePattern.MatchString(s) {
				d.errorf(n, path, "%q: want letters, digits, '.', '_', '@' and '-', starting with a letter or digit, at most 64", s)
				return
			}
			if line, dup := st.names[s]; dup {
				d.errorf(n, path, "identity %q is defined twice (first at line %d)", s, line)
				return
			}
			st.names[s] = n.Line
			id.Name = s
		}},
		{"grants", func(d *decoder, n *yaml.Node, path string) {
			seen["grants"] = true
			items, ok := d.list(n, path, "a list of grants")
			if !ok {
				return
			}
			if len(items) == 0 {
				d.errorf(n, path, "empty; want at least one grant, such as {prefix: s3/reports/, operations: [read]}")
				return
			}
			for i, item := range items {
				if g, ok := d.grant(item, fmt.Sprintf("%s[%d]", path, i)); ok {
					id.Grants = append(id.Grants, g)
				}
			}
		}},
		{"api_keys", func(d *decoder, n *yaml.Node, path string) {
			hashes, ok := d.strings(n, path, "API key hashes (sha256:<64 hex digits>)")
			if !ok {
				return
			}
			credentials += len(hashes)
			for i, h := range hashes {
				p := fmt.Sprintf("%s[%d]", path, i)
				sum, err := ParseKeyHash(h)
				if err != nil {
					d.errorf(n.Content[i], p, "%v", err)
					continue
				}
				if line, dup := st.keys[sum]; dup {
					d.errorf(n.Content[i], p, "the same key is configured twice (first at line %d)", line)
					continue
				}
				st.keys[sum] = n.Content[i].Line
				keys = append(keys, gateway.APIKey{SHA256: sum})
			}
		}},
		{"client_certs", func(d *decoder, n *yaml.Node, path string) {
			names, ok := d.strings(n, path, "client certificate common names")
			if !ok {
				return
			}
			credentials += len(names)
			if len(names) > 0 && d.out.clientCertsAt == "" {
				d.out.clientCertsAt = d.at(n, path)
			}
			for i, cn := range names {
				p := fmt.Sprintf("%s[%d]", path, i)
				if strings.ContainsFunc(cn, func(r rune) bool { return r < ' ' || r == 0x7f }) {
					d.errorf(n.Content[i], p, "control characters in a common name")
					continue
				}
				if line, dup := st.cns[cn]; dup {
					d.errorf(n.Content[i], p, "common name %q is mapped twice (first at line %d)", cn, line)
					continue
				}
				st.cns[cn] = n.Content[i].Line
				certs = append(certs, gateway.ClientCert{CommonName: cn})
			}
		}},
	})
	if n.Kind != yaml.MappingNode {
		return
	}
	for _, key := range []string{"name", "grants"} {
		if !seen[key] {
			d.errorf(n, joinPath(path, key), "missing (an identity needs a name and grants)")
		}
	}
	if credentials == 0 {
		d.errorf(n, path, "no api_keys and no client_certs: nothing authenticates as this identity")
	}
	for i := range keys {
		keys[i].Identity = id.Name
	}
	for i := range certs {
		certs[i].Identity = id.Name
	}
	st.auth.Identities = append(st.auth.Identities, id)
	st.auth.APIKeys = append(st.auth.APIKeys, keys...)
	st.auth.ClientCerts = append(st.auth.ClientCerts, certs...)
}

// grant decodes one grant: a resource prefix and operations.
func (d *decoder) grant(n *yaml.Node, path string) (gateway.Grant, bool) {
	var (
		g         gateway.Grant
		errsNow   = len(d.errs)
		hasPrefix bool
		hasOps    bool
	)
	d.fields(n, path, []field{
		{"prefix", func(d *decoder, n *yaml.Node, path string) {
			hasPrefix = true
			// "" is allowed: every resource. A null is not: write "".
			if !d.isKind(n, path, yaml.ScalarNode, `a resource prefix such as s3/reports/ ("" for every resource)`) {
				return
			}
			if strings.ContainsFunc(n.Value, func(r rune) bool { return r < ' ' || r == 0x7f }) {
				d.errorf(n, path, "control characters in a prefix")
				return
			}
			g.Prefix = n.Value
		}},
		{"operations", func(d *decoder, n *yaml.Node, path string) {
			hasOps = true
			ops, ok := d.strings(n, path, "operations")
			if !ok {
				return
			}
			if len(ops) == 0 {
				d.errorf(n, path, "empty; want some of %s", operationList())
				return
			}
			for i, op := range ops {
				o := gateway.Operation(op)
				if !slices.Contains(grantOperations, o) {
					d.errorf(n.Content[i], fmt.Sprintf("%s[%d]", path, i), "unknown operation %q (want one of %s)", op, operationList())
					return
				}
				g.Operations = append(g.Operations, o)
			}
		}},
	})
	if n.Kind == yaml.MappingNode {
		if !hasPrefix {
			d.errorf(n, joinPath(path, "prefix"), `missing (write prefix: "" to grant every resource)`)
		}
		if !hasOps {
			d.errorf(n, joinPath(path, "operations"), "missing; want some of %s", operationList())
		}
	}
	return g, len(d.errs) == errsNow
}

func operationList() string {
	names := make([]string, len(grantOperations))
	for i, op := range grantOperations {
		names[i] = string(op)
	}
	return strings.Join(names, ", ")
}

// KeyHash formats the SHA-256 of an API key as the file lists it:
// sha256:<64 hex digits>.
func KeyHash(sum [32]byte) string {
	return apiKeyHashPrefix + hex.EncodeToString(sum[:])
}

// ParseKeyHash parses sha256:<64 hex digits>, as `fencegate auth
// hash-key` prints it. Errors never quote s: it may be a plain key pasted
// by mistake.
func ParseKeyHash(s string) ([32]byte, error) {
	var sum [32]byte
	hexPart, ok := strings.CutPrefix(s, apiKeyHashPrefix)
	if !ok {
		return sum, fmt.Errorf("not a key hash: want sha256:<64 hex digits>, as printed by fencegate auth hash-key (never the plain key)")
	}
	if len(hexPart) != 64 {
		return sum, fmt.Errorf("sha256: has %d hex digits; want 64", len(hexPart))
	}
	if _, err := hex.Decode(sum[:], []byte(hexPart)); err != nil {
		return sum, fmt.Errorf("sha256: not hex digits")
	}
	if sum == ([32]byte{}) {
		return sum, fmt.Errorf("sha256: all zeros")
	}
	return sum, nil
}
