package edge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"fencegate/api"
)

// Pure unit tests of the authenticator and of authorize, without servers:
// what each Authorization header and TLS state authenticates as, and what
// each grant allows. auth_test.go shows the same through real requests.

const (
	testKeyAlice = "k-alice-8f14e45fceea167a5a36dedd4bea2543"
	testKeyBob   = "k-bob-c9f0f895fb98ab9159f51fd0297e236d"
)

func testAuth() Auth {
	return Auth{
		Identities: []Identity{
			{Name: "alice", Grants: []Grant{{Prefix: "s3/dev/alice/", Operations: []Operation{OpRead, OpWrite}}, {Prefix: "jobs-", Operations: []Operation{OpLock}}}},
			{Name: "bob", Grants: []Grant{{Prefix: "s3/dev/", Operations: []Operation{OpRead}}}},
			{Name: "root", Grants: []Grant{{Prefix: "", Operations: []Operation{OpAdmin}}}},
			{Name: "batch", Grants: []Grant{{Prefix: "s3/dev/batch/", Operations: []Operation{OpWrite, OpDelete}}}},
		},
		APIKeys: []APIKey{
			{SHA256: sha256.Sum256([]byte(testKeyAlice)), Identity: "alice"},
			{SHA256: sha256.Sum256([]byte(testKeyBob)), Identity: "bob"},
		},
		ClientCerts: []ClientCert{{CommonName: "batch-job", Identity: "batch"}},
	}
}

// verifiedTLS is the TLS state of a connection whose client certificate,
// with subject common name cn, the listener verified.
func verifiedTLS(cn string) *tls.ConnectionState {
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: cn}}
	return &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert}}}
}

func TestIdentify(t *testing.T) {
	auth, err := newAuthenticator(testAuth())
	if err != nil {
		t.Fatal(err)
	}
	unverified := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{Subject: pkix.Name{CommonName: "batch-job"}}}}
	tests := []struct {
		name          string
		authorization []string
		tls           *tls.ConnectionState
		want          string // identity; "" means ErrUnauthorized
	}{
		{"bearer key", []string{"Bearer " + testKeyAlice}, nil, "alice"},
		{"other key", []string{"Bearer " + testKeyBob}, nil, "bob"},
		{"scheme is case-insensitive", []string{"bearer " + testKeyAlice}, nil, "alice"},
		{"unknown key", []string{"Bearer k-mallory"}, nil, ""},
		{"key with a changed last byte", []string{"Bearer " + testKeyAlice[:len(testKeyAlice)-1] + "4"}, nil, ""},
		{"key prefix", []string{"Bearer " + testKeyAlice[:10]}, nil, ""},
		{"basic scheme", []string{"Basic " + testKeyAlice}, nil, ""},
		{"no scheme", []string{testKeyAlice}, nil, ""},
		{"empty bearer", []string{"Bearer "}, nil, ""},
		{"two headers", []string{"Bearer " + testKeyAlice, "Bearer " + testKeyAlice}, nil, ""},
		{"nothing", nil, nil, ""},
		{"verified client certificate", nil, verifiedTLS("batch-job"), "batch"},
		{"verified certificate, unmapped name", nil, verifiedTLS("stranger"), ""},
		{"unverified client certificate", nil, unverified, ""},
		{"bad key beside a good certificate", []string{"Bearer k-mallory"}, verifiedTLS("batch-job"), ""},
		{"key beside a certificate", []string{"Bearer " + testKeyBob}, verifiedTLS("batch-job"), "bob"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := http.NewRequest(http.MethodGet, "/v1/objects/dev/x", nil)
			r.Header["Authorization"] = tt.authorization
			r.TLS = tt.tls
			id, err := auth.identify(r)
			switch {
			case tt.want == "" && !errors.Is(err, api.ErrUnauthorized):
				t.Fatalf("identify(%q, tls %v) = %v, %v; want ErrUnauthorized", tt.authorization, tt.tls != nil, id, err)
			case tt.want != "" && (err != nil || id.Name != tt.want):
				t.Fatalf("identify(%q, tls %v) = %v, %v; want %q", tt.authorization, tt.tls != nil, id, err, tt.want)
			}
			for _, v := range tt.authorization {
				if key := strings.TrimPrefix(v, "Bearer "); err != nil && len(key) > 8 && strings.Contains(err.Error(), key) {
					t.Errorf("error %q quotes the key", err)
				}
			}
		})
	}
}

// TestKeyHashComparedWhole shows that the index on the hash's first bytes
// only narrows the candidates: a configured hash that shares them with
// the request key's hash but differs after them does not authenticate.
func TestKeyHashComparedWhole(t *testing.T) {
	auth, err := newAuthenticator(testAuth())
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("k-mallory"))
	near := sum
	near[31] ^= 1
	auth.keyIndex[prefixOf(sum)] = []apiKeyEntry{{sum: near, identity: &Identity{Name: "victim"}}}
	if id := auth.keyIdentity("k-mallory"); id != nil {
		t.Fatalf("keyIdentity of a key whose hash differs in its last byte = %q; want nil", id.Name)
	}
	auth.keyIndex[prefixOf(sum)] = append(auth.keyIndex[prefixOf(sum)], apiKeyEntry{sum: sum, identity: &Identity{Name: "mallory"}})
	if id := auth.keyIdentity("k-mallory"); id == nil || id.Name != "mallory" {
		t.Fatalf("keyIdentity with two candidates = %v; want mallory", id)
	}
}

// TestKeyComparedInConstantTime reads auth.go: the key check compares the
// whole hash with subtle.ConstantTimeCompare, and compares no bytes, hash
// or key with == or bytes.Equal, whose time depends on where the first
// difference is.
func TestKeyComparedInConstantTime(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "auth.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{"keyIdentity": false, "identify": false}
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok {
			continue
		}
		if _, ok := checked[fn.Name.Name]; !ok {
			continue
		}
		checked[fn.Name.Name] = true
		var constantTime bool
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok {
						switch x.Name + "." + sel.Sel.Name {
						case "subtle.ConstantTimeCompare":
							constantTime = true
						case "bytes.Equal", "bytes.Compare", "strings.Compare", "strings.EqualFold", "slices.Equal":
							if mentionsKey(n) {
								t.Errorf("%s: %s compares the key or its hash in variable time", fset.Position(n.Pos()), types.ExprString(n))
							}
						}
					}
				}
			case *ast.BinaryExpr:
				_, literal := n.Y.(*ast.BasicLit) // key == "": a length check
				_, result := n.X.(*ast.CallExpr)  // subtle.ConstantTimeCompare(...) == 1
				if (n.Op == token.EQL || n.Op == token.NEQ) && mentionsKey(n) && !literal && !result {
					t.Errorf("%s: %s compares the key or its hash with %s", fset.Position(n.Pos()), types.ExprString(n), n.Op)
				}
			}
			return true
		})
		if fn.Name.Name == "keyIdentity" && !constantTime {
			t.Errorf("keyIdentity does not call subtle.ConstantTimeCompare")
		}
	}
	for name, found := range checked {
		if !found {
			t.Errorf("auth.go has no func %s", name)
		}
	}
}

// mentionsKey reports whether a comparison involves the key or its hash.
func mentionsKey(n ast.Node) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && (id.Name == "key" || id.Name == "sum") {
			found = true
		}
		return true
	})
	return found
}

func TestAuthorize(t *testing.T) {
	g, err := New(Config{Auth: testAuth()})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*Identity{}
	for _, e := range g.auth.keyIndex {
		for _, k := range e {
			byName[k.identity.Name] = k.identity
		}
	}
	for _, id := range g.auth.certs {
		byName[id.Name] = id
	}
	byName["root"] = &testAuth().Identities[2]
	tests := []struct {
		identity string
		op       Operation
		resource api.Resource
		allowed  bool
	}{
		{"alice", OpWrite, "s3/dev/alice/report.csv", true},
		{"alice", OpRead, "s3/dev/alice/report.csv", true},
		{"alice", OpDelete, "s3/dev/alice/report.csv", false}, // not granted
		{"alice", OpWrite, "s3/dev/alice", false},             // the prefix ends with '/'
		{"alice", OpWrite, "s3/dev/bob/x", false},
		{"alice", OpWrite, "s3/prod/alice/x", false},
		{"alice", OpLock, "jobs-nightly", true},
		{"alice", OpLock, "backup", false},
		{"alice", OpWrite, "jobs-nightly", false}, // the lock grant is lock only
		{"bob", OpRead, "s3/dev/alice/report.csv", true},
		{"bob", OpWrite, "s3/dev/alice/report.csv", false},
		{"bob", OpLock, "jobs-nightly", false},
		{"batch", OpDelete, "s3/dev/batch/out", true},
		{"batch", OpRead, "s3/dev/batch/out", false},
		{"root", OpWrite, "partner/payments/accounts/a1", true},
		{"root", OpDelete, "s3/any/thing", true},
		{"root", OpLock, "anything", true},
	}
	for _, tt := range tests {
		ctx := withExchange(context.Background(), &exchange{identity: byName[tt.identity]})
		err := g.Authorize(ctx, tt.op, tt.resource)
		if tt.allowed && err != nil || !tt.allowed && !errors.Is(err, api.ErrForbidden) {
			t.Errorf("%s: authorize(%s, %q) = %v; want allowed %v", tt.identity, tt.op, tt.resource, err, tt.allowed)
		}
		if !tt.allowed && err != nil {
			for _, part := range []string{tt.identity, string(tt.op), string(tt.resource)} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("authorize error %q does not name %q", err, part)
				}
			}
		}
	}
	// A request that no middleware authenticated is refused, not allowed.
	if err := g.Authorize(context.Background(), OpRead, "s3/dev/x"); !errors.Is(err, api.ErrUnauthorized) {
		t.Errorf("authorize without identity = %v; want ErrUnauthorized", err)
	}
	// Without auth, everything is allowed, as identity "".
	open, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := open.Authorize(context.Background(), OpAdmin, "s3/dev/x"); err != nil || open.auth != nil {
		t.Errorf("zero Auth: Authorize = %v, auth %v; want nil, nil", err, open.auth)
	}
	if name := CallerName(context.Background()); name != "" {
		t.Errorf("CallerName without auth = %q; want \"\"", name)
	}
}

// TestAuthValidate refuses inconsistent configurations with an error that
// names the entry, and never the key.
func TestAuthValidate(t *testing.T) {
	alice := Identity{Name: "alice", Grants: []Grant{{Prefix: "s3/", Operations: []Operation{OpRead}}}}
	aliceKey := APIKey{SHA256: sha256.Sum256([]byte(testKeyAlice)), Identity: "alice"}
	tests := []struct {
		name string
		auth Auth
		want string
	}{
		{"key for an unknown identity", Auth{Identities: []Identity{alice}, APIKeys: []APIKey{{SHA256: aliceKey.SHA256, Identity: "bob"}}}, `api_keys[0]: unknown identity "bob"`},
		{"certificate for an unknown identity", Auth{Identities: []Identity{alice}, ClientCerts: []ClientCert{{CommonName: "x", Identity: "bob"}}}, `client_certs[0]: unknown identity "bob"`},
		{"unnamed identity", Auth{Identities: []Identity{{}}, APIKeys: []APIKey{aliceKey}}, "identities[0]: empty name"},
		{"identity twice", Auth{Identities: []Identity{alice, alice}, APIKeys: []APIKey{aliceKey}}, `identities[1].name: identity "alice" is defined twice (first at identities[0].name)`},
		{"unknown operation", Auth{Identities: []Identity{{Name: "alice", Grants: []Grant{{Operations: []Operation{"rwx"}}}}}, APIKeys: []APIKey{aliceKey}}, `grants[0].operations[0]: unknown operation "rwx"`},
		{"grant without operations", Auth{Identities: []Identity{{Name: "alice", Grants: []Grant{{Prefix: "s3/"}}}}, APIKeys: []APIKey{aliceKey}}, `grants[0]: no operations`},
		{"zero hash", Auth{Identities: []Identity{alice}, APIKeys: []APIKey{{Identity: "alice"}}}, "api_keys[0]: empty SHA-256"},
		{"key twice", Auth{Identities: []Identity{alice}, APIKeys: []APIKey{aliceKey, aliceKey}}, "api_keys[1]: the same key is configured twice (first at api_keys[0])"},
		{"empty common name", Auth{Identities: []Identity{alice}, ClientCerts: []ClientCert{{Identity: "alice"}}}, "client_certs[0]: empty common name"},
		{"common name twice", Auth{Identities: []Identity{alice}, ClientCerts: []ClientCert{{CommonName: "c", Identity: "alice"}, {CommonName: "c", Identity: "alice"}}}, `client_certs[1]: common name "c" is mapped twice`},
		{"identities without credentials", Auth{Identities: []Identity{alice}}, "no API key, client certificate or S3 access key"},
		{"S3 access key id twice", Auth{Identities: []Identity{withS3Keys(alice, "alice-s3-key", "bob-s3-key"), withS3Keys(Identity{Name: "bob"}, "bob-s3-key")}},
			`identities[1].s3_keys[0].access_key_id: access key id "bob-s3-key" is configured twice (first at identities[0].s3_keys[1].access_key_id)`},
		{"S3 access key id with a slash", Auth{Identities: []Identity{withS3Keys(alice, "AKIA/2026")}}, `identities[0].s3_keys[0].access_key_id: "AKIA/2026": want 3 to 128 letters`},
		{"empty S3 access key id", Auth{Identities: []Identity{withS3Keys(alice, "")}}, `identities[0].s3_keys[0].access_key_id: "": want 3 to 128`},
		{"S3 access key id with a control character", Auth{Identities: []Identity{withS3Keys(alice, "AKIA\x01")}}, "identities[0].s3_keys[0].access_key_id: an access key id of 5 bytes: want"},
		{"empty S3 secret", Auth{Identities: []Identity{{Name: "alice", S3Keys: []S3Key{{AccessKeyID: "alice-s3-key"}}}}}, "identities[0].s3_keys[0].secret: empty secret access key"},
		{"S3 secret with a newline", Auth{Identities: []Identity{{Name: "alice", S3Keys: []S3Key{{AccessKeyID: "alice-s3-key", SecretAccessKey: testKeyAlice + "\n"}}}}}, "identities[0].s3_keys[0].secret: the secret access key has spaces or control characters"},
		{"identity name with a space", Auth{Identities: []Identity{{Name: "a b", Grants: alice.Grants}}, APIKeys: []APIKey{{SHA256: aliceKey.SHA256, Identity: "a b"}}}, `identities[0].name: "a b": want letters`},
		{"common name with a control character", Auth{Identities: []Identity{alice}, ClientCerts: []ClientCert{{CommonName: "c\x01", Identity: "alice"}}}, "client_certs[0]: control characters in a common name"},
		{"prefix with a control character", Auth{Identities: []Identity{{Name: "alice", Grants: []Grant{{Prefix: "s3/\n", Operations: []Operation{OpRead}}}}}, APIKeys: []APIKey{aliceKey}}, "identities[0].grants[0].prefix: control characters in a prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.auth.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v; want an error containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), testKeyAlice) {
				t.Errorf("Validate() = %v; quotes a key", err)
			}
			if e, err := New(Config{Auth: tt.auth}); err == nil || e != nil {
				t.Errorf("New: %v, %v; want the error and no edge", e, err)
			}
		})
	}
	if err := testAuth().Validate(); err != nil {
		t.Errorf("Validate(valid) = %v", err)
	}
	// An identity whose only credential is an S3 access key is valid: the
	// REST API then authenticates no one (fail closed), the S3 API does.
	s3Only := Auth{Identities: []Identity{withS3Keys(alice, "alice-s3-key")}}
	if err := s3Only.Validate(); err != nil || !s3Only.Enabled() {
		t.Errorf("Validate(S3 keys only) = %v, Enabled %v; want nil, true", err, s3Only.Enabled())
	}
}

// withS3Keys returns id with S3 access keys of the ids given, each with
// the secret testKeyAlice.
func withS3Keys(id Identity, accessKeyIDs ...string) Identity {
	id.S3Keys = nil
	for _, k := range accessKeyIDs {
		id.S3Keys = append(id.S3Keys, S3Key{AccessKeyID: k, SecretAccessKey: testKeyAlice})
	}
	return id
}

// TestSecretNeverPrinted: an S3 secret formatted with every verb, logged
// or marshalled shows [REDACTED], also inside an Identity.
func TestSecretNeverPrinted(t *testing.T) {
	const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	id := Identity{Name: "etl", S3Keys: []S3Key{{AccessKeyID: "AKIAIOSFODNN7EXAMPLE", SecretAccessKey: secret}}}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("identity", "id", id, "secret", id.S3Keys[0].SecretAccessKey)
	asJSON, err := json.Marshal(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{
		fmt.Sprint(id), fmt.Sprintf("%v %+v %#v %s %q", id, id, id, id.S3Keys[0].SecretAccessKey, id.S3Keys[0].SecretAccessKey),
		logs.String(), string(asJSON),
	} {
		if strings.Contains(out, secret) || !strings.Contains(out, "[REDACTED]") {
			t.Errorf("printed %q; want [REDACTED] and never the secret", out)
		}
	}
	if string(id.S3Keys[0].SecretAccessKey) != secret {
		t.Errorf("string(Secret) = %q; want the secret itself", string(id.S3Keys[0].SecretAccessKey))
	}
}
