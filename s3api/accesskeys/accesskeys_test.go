package accesskeys_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"fencegate/edge"
	"fencegate/s3api/accesskeys"
	"fencegate/s3api/sigv4"
)

const (
	etlSecret     = "etl-secret-0123456789abcdefghijklmnopqrst"
	reportsSecret = "reports-secret-0123456789abcdefghijklmno"
)

// testAuth has two identities with S3 keys (one with two) and one with
// only an API key.
func testAuth() edge.Auth {
	return edge.Auth{
		Identities: []edge.Identity{
			{Name: "etl", Grants: []edge.Grant{{Prefix: "s3/etl/", Operations: []edge.Operation{edge.OpWrite}}},
				S3Keys: []edge.S3Key{{AccessKeyID: "AKIAETL0000000000001", SecretAccessKey: etlSecret}, {AccessKeyID: "etl-rotated", SecretAccessKey: etlSecret + "2"}}},
			{Name: "reports", S3Keys: []edge.S3Key{{AccessKeyID: "AKIAREPORTS000000001", SecretAccessKey: reportsSecret}}},
			{Name: "rest-only"},
		},
		APIKeys: []edge.APIKey{{SHA256: sha256.Sum256([]byte("rest-key")), Identity: "rest-only"}},
	}
}

// TestSecretKey: each access key id finds its own secret and identity;
// any other id, the empty one and one that differs in case are unknown.
func TestSecretKey(t *testing.T) {
	store, err := accesskeys.New(testAuth())
	if err != nil {
		t.Fatal(err)
	}
	if store.Len() != 3 {
		t.Errorf("Len() = %d; want 3", store.Len())
	}
	tests := []struct {
		id, secret, identity string
		err                  error
	}{
		{"AKIAETL0000000000001", etlSecret, "etl", nil},
		{"etl-rotated", etlSecret + "2", "etl", nil},
		{"AKIAREPORTS000000001", reportsSecret, "reports", nil},
		{"akiaetl0000000000001", "", "", sigv4.ErrUnknownAccessKey},
		{"AKIAETL000000000000", "", "", sigv4.ErrUnknownAccessKey},
		{"", "", "", sigv4.ErrUnknownAccessKey},
		{"rest-key", "", "", sigv4.ErrUnknownAccessKey},
	}
	for _, tt := range tests {
		secret, identity, err := store.SecretKey(context.Background(), tt.id)
		if secret != tt.secret || identity != tt.identity || !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
			t.Errorf("SecretKey(%q) = %q, %q, %v; want %q, %q, %v", tt.id, secret, identity, err, tt.secret, tt.identity, tt.err)
		}
	}
}

// TestNewRefusesInvalidKeys: an access key id used twice (here by two
// identities) or an empty secret is refused, naming the key's path and
// never a secret.
func TestNewRefusesInvalidKeys(t *testing.T) {
	twice := testAuth()
	twice.Identities[1].S3Keys[0].AccessKeyID = "etl-rotated"
	empty := testAuth()
	empty.Identities[0].S3Keys[1].SecretAccessKey = ""
	tests := []struct {
		name string
		auth edge.Auth
		want string
	}{
		{"id twice", twice, `identities[1].s3_keys[0].access_key_id: access key id "etl-rotated" is configured twice (first at identities[0].s3_keys[1].access_key_id)`},
		{"empty secret", empty, "identities[0].s3_keys[1].secret: empty secret access key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, err := accesskeys.New(tt.auth)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New() = %v, %v; want an error containing %q", store, err, tt.want)
			}
			for _, secret := range []string{etlSecret, reportsSecret} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("New() = %v; quotes a secret", err)
				}
			}
		})
	}
}

// TestVerifierWithStore: the signature verifier, with the store as its
// KeyStore, accepts a request that the AWS SDK's signer signed with an
// identity's key, as that identity; the same request signed with another
// secret is SignatureDoesNotMatch, and an unknown id InvalidAccessKeyId.
func TestVerifierWithStore(t *testing.T) {
	store, err := accesskeys.New(testAuth())
	if err != nil {
		t.Fatal(err)
	}
	v, err := sigv4.New(sigv4.Config{Keys: store, Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, id, secret string
		identity, code   string
	}{
		{"right secret", "etl-rotated", etlSecret + "2", "etl", ""},
		{"another identity's secret", "etl-rotated", reportsSecret, "", "SignatureDoesNotMatch"},
		{"unknown id", "AKIAUNKNOWN000000000", etlSecret, "", "InvalidAccessKeyId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "http://gateway.example/etl/part-0", nil)
			sum := sha256.Sum256(nil)
			payload := hex.EncodeToString(sum[:])
			r.Header.Set("X-Amz-Content-Sha256", payload)
			err := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).SignHTTP(context.Background(),
				aws.Credentials{AccessKeyID: tt.id, SecretAccessKey: tt.secret}, r, payload, "s3", "us-east-1", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			res, err := v.Verify(context.Background(), r)
			var refusal *sigv4.Error
			switch {
			case tt.code == "" && (err != nil || res.Identity != tt.identity):
				t.Fatalf("Verify = %+v, %v; want identity %q", res, err, tt.identity)
			case tt.code != "" && (!errors.As(err, &refusal) || refusal.Code != tt.code):
				t.Fatalf("Verify = %v; want %s", err, tt.code)
			}
		})
	}
}
