// Package testenv owns the real services that the project's tests run
// against: an embedded single-member etcd ([StartEtcd]), the versitygw S3
// server started as a child process ([StartS3], [StartS3Main]), and an HTTP
// reverse proxy that counts the requests passing through it
// ([NewCountingProxy]), used to prove that nothing reached an upstream.
//
// Every helper takes a [testing.TB], calls tb.Helper, listens on 127.0.0.1
// with a free port, fails the test (never skips it) when a service cannot be
// started, and releases everything it started with tb.Cleanup.
//
// The S3 server is never linked into the project: its binary is looked up
// in the FENCEGATE_VERSITYGW environment variable, else at bin/versitygw
// under the repository root (the nearest directory above the working
// directory that holds go.mod). `make tools` builds it there.
package testenv
