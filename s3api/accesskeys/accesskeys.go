// Package accesskeys is the S3 API's key store: the S3 access keys of the
// auth config's identities (edge.Identity.S3Keys), looked up by access
// key id for the signature verifier (sigv4.KeyStore).
//
// A secret leaves the store only as the return value of SecretKey, to the
// verifier that computes the expected signature; errors name the access
// key id, never a secret.
package accesskeys

import (
	"context"
	"fmt"

	"fencegate/edge"
	"fencegate/s3api/sigv4"
)

// Store maps access key ids to their secrets and identities. It is
// immutable, and safe for concurrent use.
type Store struct {
	keys map[string]entry
}

// entry is an access key's secret and the name of its identity.
type entry struct {
	secret   edge.Secret
	identity string
}

var _ sigv4.KeyStore = (*Store)(nil)

// New indexes the S3 access keys of a's identities. It fails when a is
// not valid (edge.Auth.Validate: among others, an access key id used
// twice, or an empty secret).
func New(a edge.Auth) (*Store, error) {
	if err := a.Validate(); err != nil {
		return nil, fmt.Errorf("accesskeys: %w", err)
	}
	s := &Store{keys: map[string]entry{}}
	for _, id := range a.Identities {
		for _, k := range id.S3Keys {
			s.keys[k.AccessKeyID] = entry{secret: k.SecretAccessKey, identity: id.Name}
		}
	}
	return s, nil
}

// Len returns how many access keys s has.
func (s *Store) Len() int { return len(s.keys) }

// SecretKey returns the secret access key of accessKeyID and the name of
// its identity, or sigv4.ErrUnknownAccessKey. The lookup is a map's: an
// access key id is not a secret (clients send it in the clear), so the
// time it takes may depend on it; the secret is compared by the verifier,
// as a signature, in constant time.
func (s *Store) SecretKey(_ context.Context, accessKeyID string) (secret, identity string, err error) {
	e, ok := s.keys[accessKeyID]
	if !ok {
		return "", "", sigv4.ErrUnknownAccessKey
	}
	return string(e.secret), e.identity, nil
}
