// Package sigv4 owns the authentication of S3 protocol requests: it
// verifies AWS Signature Version 4 as S3 does and verifies request bodies
// while they stream. It does not route, authorize or render anything: a
// front door calls Verifier.Verify first (or Verifier.VerifyQuery, with
// the query it parsed itself), maps a returned *Error to S3's XML error
// body (Code, Status, Message), and streams Result.Body onward.
//
// # What is verified
//
//   - The Authorization header ("AWS4-HMAC-SHA256 Credential=...,
//     SignedHeaders=..., Signature=...") and presigned URLs (X-Amz-Algorithm,
//     X-Amz-Credential, X-Amz-Date, X-Amz-Expires of at most 7 days,
//     X-Amz-SignedHeaders, X-Amz-Signature). Both at once: InvalidArgument.
//   - The credential scope: its date is X-Amz-Date's, its service is s3, its
//     terminator aws4_request, and its region Config.Region when set.
//   - The clock: X-Amz-Date more than 15 minutes from now is
//     RequestTimeTooSkewed; a presigned URL past X-Amz-Date + X-Amz-Expires
//     is AccessDenied "Request has expired".
//   - The signature, recomputed as the AWS SDK's v4 signer
//     (github.com/aws/aws-sdk-go-v2/aws/signer/v4) computes it over a copy
//     of the request that carries exactly the headers the client signed,
//     with S3's path rule (the path as sent, not escaped twice), byte for
//     byte (canonical.go; a fuzz target compares the two), and compared
//     with hmac.Equal. The signing key is derived once per access key id,
//     secret, day and region, and derived again when any of them changes
//     (a rotated secret at once). Unknown key: InvalidAccessKeyId;
//     mismatch: SignatureDoesNotMatch. host must be signed and so must
//     every x-amz-* header present (else AccessDenied, as S3).
//   - Nothing rides along a valid signature unsigned: Authorization,
//     X-Amz-Date, X-Amz-Content-Sha256, X-Amz-Decoded-Content-Length and
//     X-Amz-Trailer are sent at most once, and the query must parse (a
//     pair with a bad escape or after a ';' is dropped by url.ParseQuery,
//     so no canonical query covers it): else InvalidArgument.
//   - Headers in a presigned query: the newest SDKs' presigners move some
//     headers into the query, where the signature covers them:
//     X-Amz-Content-Sha256 (UNSIGNED-PAYLOAD only), x-amz-checksum-crc32
//     and the other checksums, x-amz-sdk-checksum-algorithm
//     (naming the checksum's algorithm) and x-amz-checksum-mode (ENABLED).
//     Each counts as its header: Verify sets it on the request, and a
//     checksum is checked against the body (BadDigest), so the AWS SDK for
//     JavaScript's default PUT URL, which carries the CRC32 of the empty
//     body it was presigned without, takes no other body, as on S3. Sent
//     twice (in any spelling), beside the same header, or in the query of
//     a header-signed request: InvalidArgument. IsQueryHeader names them
//     for a router.
//   - The body, by x-amz-content-sha256: UNSIGNED-PAYLOAD; a hex SHA-256
//     (XAmzContentSHA256Mismatch); aws-chunked STREAMING-AWS4-HMAC-SHA256-PAYLOAD
//     (each chunk signature chained from the request's signature),
//     STREAMING-UNSIGNED-PAYLOAD-TRAILER and
//     STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER (the trailer signature too),
//     with x-amz-decoded-content-length enforced (IncompleteBody), and
//     nothing but blank lines after the last chunk and its trailer
//     (IncompleteBody: no signature covers such bytes). A checksum
//     x-amz-checksum-<algorithm>, of any of S3's ten algorithms (package
//     s3checksum: CRC32 to XXHASH128), as a header or as the trailer
//     x-amz-trailer names, is verified (BadDigest); an x-amz-checksum-*
//     header naming no algorithm (but -type, -mode, -algorithm) is
//     InvalidRequest, never ignored.
//
// # Using the body
//
// Result.Body yields the decoded payload. Its last Read returns io.EOF only
// after every check passed; on failure that Read returns the *Error and the
// body's last byte is never handed over (it is held back until the checks
// end). So a caller commits only after io.EOF: streamed into an upstream
// PutObject with a fixed Content-Length, a failed body makes the upload fail
// short of its last byte and nothing is stored.
// A body of length zero has no last byte: Verify checks it (its payload
// hash, checksum, chunk framing and trailer) before it returns.
//
// # Bounds
//
// Chunk data streams through a fixed 32 KiB buffer; a chunk header or
// trailer line over 4 KiB, a chunk size over 15 hex digits or beyond
// x-amz-decoded-content-length is refused before anything is allocated for
// it. Secrets come only from the KeyStore and never appear in an error
// message; this package does not log.
//
// # Differences from AWS S3
//
//   - Only AWS4-HMAC-SHA256: Signature Version 2 (header or presigned) is
//     InvalidRequest "Please use AWS4-HMAC-SHA256", as in S3 regions opened
//     since 2014; no SigV4A, no POST policy (browser form) uploads, no
//     anonymous requests (AccessDenied).
//   - X-Amz-Date is required; the Date header is not accepted in its place.
//   - A signature covering user-agent, expect, transfer-encoding,
//     x-amzn-trace-id or a zero content-length is refused with
//     SignatureDoesNotMatch and a message naming the header: the verifier
//     computes signatures as the SDK's signer does, which never signs
//     those. aws-cli, boto3, the AWS SDKs, minio-go and rclone do not sign
//     them.
//   - Content-MD5 is not checked here (the upstream store checks it).
//   - aws-chunked bodies are refused with query authentication.
package sigv4
