// Package devstack starts the real services that fencegate runs against, on
// 127.0.0.1, for `fencegate dev` and for test harnesses: an embedded
// single-member etcd ([StartEtcd]) and the versitygw S3 server with its
// posix backend ([StartVersityGW]).
//
// versitygw is never linked into fencegate: it runs as a child process in
// its own process group, found by [FindVersityGW]. `make tools` builds it
// into bin/ at the repository root.
//
// Everything here takes its settings from a Config; nothing reads flags.
// The one exception is [FindVersityGW], which honours the
// FENCEGATE_VERSITYGW environment variable so that every entry point finds
// the binary the same way.
package devstack
