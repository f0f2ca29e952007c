package config

// The auth section of the config file: identities, what each may do, and
// the API keys (stored as SHA-256 hashes) and client certificates that
// authenticate as each.

import (
	"encoding/hex"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"fencegate/gateway"
)

// apiKeyHashPrefix starts a hashed API key in the config file.
const apiKeyHashPrefix = "sha256:"

// authState is what the auth section's decoding remembers across
// identities.
type authState struct {
	auth gateway.Auth // what is decoded so far
	// aliases maps the paths of gateway.Auth's flat lists of keys and
	// certificates (auth.api_keys[2]) to the file's, under their
	// identities (auth.identities[1].api_keys[0]).
	aliases map[string]string
}

// auth decodes the auth section; gateway.Auth.Validate checks it.
func (d *decoder) auth(n *yaml.Node, path string) {
	st := &authState{aliases: map[string]string{}}
	errsNow := len(d.errs)
	var identitiesSeen bool
	d.fields(n, path, []field{
		{"identities", func(d *decoder, n *yaml.Node, path string) {
			identitiesSeen = true
			items, ok := d.list(n, path, "a list of identities")
			if !ok || !d.nonEmpty(n, path, len(items), "at least one identity") {
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
	d.fieldErrors(st.auth.Validate(), path+".", st.aliases)
	if len(d.errs) > errsNow {
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
			id.Name, _ = d.scalar(n, path, "an identity name")
		}},
		{"grants", func(d *decoder, n *yaml.Node, path string) {
			seen["grants"] = true
			items, ok := d.list(n, path, "a list of grants")
			if !ok || !d.nonEmpty(n, path, len(items), "at least one grant, such as {prefix: s3/reports/, operations: [read]}") {
				return
			}
			for i, item := range items {
				id.Grants = append(id.Grants, d.grant(item, fmt.Sprintf("%s[%d]", path, i)))
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
				st.aliases[fmt.Sprintf("auth.api_keys[%d]", len(st.auth.APIKeys)+len(keys))] = p
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
				st.aliases[fmt.Sprintf("auth.client_certs[%d]", len(st.auth.ClientCerts)+len(certs))] = fmt.Sprintf("%s[%d]", path, i)
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
func (d *decoder) grant(n *yaml.Node, path string) gateway.Grant {
	var (
		g         gateway.Grant
		hasPrefix bool
		hasOps    bool
	)
	d.fields(n, path, []field{
		{"prefix", func(d *decoder, n *yaml.Node, path string) {
			hasPrefix = true
			// "" is allowed: every resource. A null is not: write "".
			if d.isKind(n, path, yaml.ScalarNode, `a resource prefix such as s3/reports/ ("" for every resource)`) {
				g.Prefix = n.Value
			}
		}},
		{"operations", func(d *decoder, n *yaml.Node, path string) {
			hasOps = true
			ops, ok := d.strings(n, path, "operations")
			if !ok || !d.nonEmpty(n, path, len(ops), "operations such as [read, write]") {
				return
			}
			for _, op := range ops {
				g.Operations = append(g.Operations, gateway.Operation(op))
			}
		}},
	})
	if n.Kind == yaml.MappingNode {
		if !hasPrefix {
			d.errorf(n, joinPath(path, "prefix"), `missing (write prefix: "" to grant every resource)`)
		}
		if !hasOps {
			d.errorf(n, joinPath(path, "operations"), "missing; want operations such as [read, write]")
		}
	}
	return g
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
