package sigv4_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	"fencegate/s3api/sigv4"
)

// rotatingKeys is a KeyStore whose secret can be replaced, as when an
// operator rotates a leaked secret.
type rotatingKeys struct {
	mu     sync.Mutex
	secret string
}

func (k *rotatingKeys) SecretKey(_ context.Context, id string) (string, string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if id != testAccessKey {
		return "", "", sigv4.ErrUnknownAccessKey
	}
	return k.secret, "rotating", nil
}

func (k *rotatingKeys) set(s string) {
	k.mu.Lock()
	k.secret = s
	k.mu.Unlock()
}

// TestRotatedSecretRefusedAtOnce: once the KeyStore answers a new secret,
// a request signed with the old one is refused and one signed with the new
// one accepted, the same day. (The SDK signer caches derived keys by access
// key id, region, service and day, not by secret: a verifier that kept one
// signer would go on accepting the old secret until midnight UTC.)
func TestRotatedSecretRefusedAtOnce(t *testing.T) {
	ks := &rotatingKeys{secret: "old-secret"}
	s := newS3Server(t, false, sigv4.Config{Keys: ks})
	send := func(secret string) outcome {
		t.Helper()
		resp, err := s.Client().Do(request{method: http.MethodGet, target: "/bucket/key", secret: secret}.build(t, s.URL))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return s.last(t)
	}
	if o := send("old-secret"); o.Code != "" {
		t.Fatalf("before rotation, the old secret: %v; want accepted", o.Err)
	}
	ks.set("new-secret")
	if o := send("old-secret"); o.Code != "SignatureDoesNotMatch" {
		t.Errorf("after rotation, the old secret: code %q; want SignatureDoesNotMatch", o.Code)
	}
	if o := send("new-secret"); o.Code != "" {
		t.Errorf("after rotation, the new secret: %v; want accepted", o.Err)
	}
}
