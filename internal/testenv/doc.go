// Package testenv gives tests the real services that the project runs
// against: an embedded single-member etcd ([StartEtcd]), the versitygw S3
// server ([StartS3], [StartS3Main], [RunWithS3]), the fake-gcs-server
// Google Cloud Storage emulator ([StartGCS]), and an HTTP reverse proxy
// that counts the requests passing through it ([NewCountingProxy]), used to
// prove that nothing reached an upstream. [WaitUntil] is the one polling
// loop for tests that wait for a condition.
//
// It is a testing.TB layer over [fencegate/internal/devstack], which
// starts the servers for `fencegate dev` too: the process, the ports, the
// readiness wait, the binary lookup ([devstack.FindVersityGW]) and the
// etcd settings are devstack's. This package adds what tests need on top:
// every helper takes a [testing.TB], calls tb.Helper, fails the test (never
// skips it) when a service cannot be started, logs server errors to the
// test output, and releases everything it started with tb.Cleanup.
//
// The S3 server and the GCS emulator are never linked into the project:
// `make tools` builds their binaries into bin/ at the repository root, and
// FENCEGATE_VERSITYGW ([VersitygwEnv]) and FENCEGATE_FAKE_GCS
// ([FakeGCSEnv]) override where they are looked up.
//
// Package [fencegate/internal/testenv/s3door], beside it, wires the S3
// API's front door on these services as fencegate serve wires it.
package testenv
