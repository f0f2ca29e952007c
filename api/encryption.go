package api

import "log/slog"

// Encryption is the server-side encryption of an object in an S3 store,
// as S3's x-amz-server-side-encryption* headers say it: what a write asks
// for (SSE-S3, SSE-KMS or DSSE-KMS with Algorithm, or a key of the
// client's own, SSE-C, with Customer), and what the store answers a
// write or read of the object. The zero value is none asked or answered.
// Front doors validate it; backends send it as it is.
type Encryption struct {
	// Algorithm is x-amz-server-side-encryption: "AES256", "aws:kms" or
	// "aws:kms:dsse".
	Algorithm string
	// KMSKeyID, KMSContext and BucketKeyEnabled are
	// x-amz-server-side-encryption-aws-kms-key-id, -context (base64 JSON)
	// and -bucket-key-enabled ("true" or "false"), of SSE-KMS.
	KMSKeyID         string
	KMSContext       string
	BucketKeyEnabled string
	// Customer is the client's own key (SSE-C).
	Customer CustomerKey
}

// CustomerKey is an SSE-C key: x-amz-server-side-encryption-customer-
// algorithm, -key and -key-MD5. A write sends it for the store to encrypt
// with; every read, and the gateway's own observation of the object,
// sends it too, as S3 reads an SSE-C object only with its key. In an
// answer Key is empty. The zero value is none.
type CustomerKey struct {
	// Algorithm is "AES256".
	Algorithm string
	// Key is the key, base64, as sent: a secret, which the gateway
	// passes to the store and never logs, keeps or echoes.
	Key Secret
	// KeyMD5 is the base64 MD5 of the key's bytes.
	KeyMD5 string
}

// IsZero reports whether k names no key.
func (k CustomerKey) IsZero() bool { return k == CustomerKey{} }

// Secret is a string never to be printed: fmt and slog show
// "[REDACTED]" (an empty Secret as ""), so that no log line or error
// message built from a value that holds one repeats it. Code that sends
// it converts it with string().
type Secret string

// String is "[REDACTED]", or "" for an empty Secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[REDACTED]"
}

// GoString is String, for %#v.
func (s Secret) GoString() string { return s.String() }

// LogValue is String, for slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

var _ slog.LogValuer = Secret("")
