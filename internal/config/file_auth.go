package config

// The auth section of the config file: identities, what each may do, and
// the API keys (stored as SHA-256 hashes), client certificates and S3
// access keys (secrets read from a file or an environment variable) that
// authenticate as each.

import (
	"encoding/hex"
	"fencegate/edge"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// apiKeyHashPrefix starts a hashed API key in the config file.
const apiKeyHashPrefix = "sha256:"

// authState is what the auth section's decoding remembers across
// identities.
type authState struct {
	auth edge.Auth // what is decoded so far
	// aliases maps the paths of edge.Auth's flat lists of keys and
	// certificates (auth.api_keys[2]) to the file's, under their
	// identities (auth.identities[1].api_keys[0]).
	aliases map[string]string
}

// auth decodes the auth section; edge.Auth.Validate checks it.
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
		id          edge.Identity
		keys        []edge.APIKey
		certs       []edge.ClientCert
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
				keys = append(keys, edge.APIKey{SHA256: sum})
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
				certs = append(certs, edge.ClientCert{CommonName: cn})
			}
		}},
		{"s3_keys", func(d *decoder, n *yaml.Node, path string) {
			items, ok := d.list(n, path, "a list of S3 access keys such as {access_key_id: AKIA..., secret_env: NAME}")
			if !ok || !d.nonEmpty(n, path, len(items), "S3 access keys such as {access_key_id: AKIA..., secret_file: FILE}") {
				return
			}
			credentials += len(items)
			for i, item := range items {
				id.S3Keys = append(id.S3Keys, d.s3Key(item, fmt.Sprintf("%s[%d]", path, i)))
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
		d.errorf(n, path, "no api_keys, client_certs or s3_keys: nothing authenticates as this identity")
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

// maxSecretFileBytes bounds a secret_file: it holds one secret.
const maxSecretFileBytes = 4 << 10

// s3Key decodes one S3 access key: its id, and its secret from exactly
// one of secret_file (a file holding the secret, one trailing newline
// allowed) and secret_env (an environment variable). Errors never quote
// the secret. edge.Auth.Validate checks the id and that no id is used
// twice.
func (d *decoder) s3Key(n *yaml.Node, path string) edge.S3Key {
	var (
		k       edge.S3Key
		sources []string
	)
	d.fields(n, path, []field{
		{"access_key_id", func(d *decoder, n *yaml.Node, path string) {
			k.AccessKeyID, _ = d.scalar(n, path, "an access key id")
		}},
		{"secret_file", func(d *decoder, n *yaml.Node, path string) {
			sources = append(sources, "secret_file")
			name, ok := d.scalar(n, path, "the name of a file that holds the secret access key")
			if !ok {
				return
			}
			if !filepath.IsAbs(name) {
				name = filepath.Join(d.dir, name)
			}
			secret, err := readSecretFile(name)
			if err != nil {
				d.errorf(n, path, "%v", err)
				return
			}
			if d.checkSecret(n, path, secret) {
				k.SecretAccessKey = edge.Secret(secret)
			}
		}},
		{"secret_env", func(d *decoder, n *yaml.Node, path string) {
			sources = append(sources, "secret_env")
			name, ok := d.scalar(n, path, "the name of an environment variable that holds the secret access key")
			if !ok {
				return
			}
			if !envNamePattern.MatchString(name) {
				d.errorf(n, path, "%q is not an environment variable name (want letters, digits and _)", name)
				return
			}
			secret, ok := d.lookupEnv(name)
			if !ok || secret == "" {
				d.errorf(n, path, "environment variable %s is not set", name)
				return
			}
			if d.checkSecret(n, path, secret) {
				k.SecretAccessKey = edge.Secret(secret)
			}
		}},
	})
	if n.Kind != yaml.MappingNode {
		return k
	}
	if _, ok := fieldNode(n, "access_key_id"); !ok {
		d.errorf(n, joinPath(path, "access_key_id"), "missing (an S3 key needs access_key_id and secret_file or secret_env)")
	}
	switch len(sources) {
	case 0:
		d.errorf(n, path, "no secret: set secret_file or secret_env")
	case 2:
		second, _ := fieldNode(n, sources[1])
		d.errorf(second, joinPath(path, sources[1]), "set secret_file or secret_env, not both")
	}
	return k
}

// fieldNode returns the key node of the mapping n's field key.
func fieldNode(n *yaml.Node, key string) (*yaml.Node, bool) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], true
		}
	}
	return nil, false
}

// checkSecret reports whether secret is a plausible secret access key,
// recording the problem if not: not empty, and no spaces or control
// characters (a file with more than the secret in it).
func (d *decoder) checkSecret(n *yaml.Node, path, secret string) bool {
	switch {
	case secret == "":
		d.errorf(n, path, "empty secret access key")
	case strings.ContainsFunc(secret, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		d.errorf(n, path, "the secret access key has spaces, control characters or more than one line; want the secret alone")
	default:
		return true
	}
	return false
}

// readSecretFile reads a secret access key from the file name: its whole
// content but one trailing newline. Errors never quote the content.
func readSecretFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFileBytes+1))
	if err != nil {
		return "", err
	}
	if len(data) > maxSecretFileBytes {
		return "", fmt.Errorf("%s: larger than %v; want a file that holds the secret access key alone", name, byteSize(maxSecretFileBytes))
	}
	secret := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if secret == "" {
		return "", fmt.Errorf("%s is empty; want the secret access key", name)
	}
	return secret, nil
}

// grant decodes one grant: a resource prefix and operations.
func (d *decoder) grant(n *yaml.Node, path string) edge.Grant {
	var (
		g         edge.Grant
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
				g.Operations = append(g.Operations, edge.Operation(op))
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
