package sigv4

import "fencegate/internal/sigv4core"

// signingKey is the signing key of secret for date (YYYYMMDD) and region,
// as Verify derives it: what the tests sign chunks and trailers with.
var signingKey = sigv4core.DeriveKey
