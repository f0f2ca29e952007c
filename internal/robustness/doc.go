// Package robustness is fencegate's fault-injection suite, in the manner
// of etcd's tests/robustness and Jepsen: it runs seeded histories of a
// real workload against the real system, injects faults, and checks the
// recorded history with porcupine and with invariants read back from S3
// and etcd.
//
// The system under test runs on 127.0.0.1, as child processes in their
// own process groups: three etcd members (etcdnode, a main over etcd's
// embed package, built from the version in go.mod), three gateways (the
// real cmd/fencegate binary), versitygw and fake-gcs-server. In-process
// proxies sit on every link: a TCP fault proxy (Proxy: delay, blackhole,
// drop, reset) on each etcd peer link, each gateway->etcd link and each
// gateway->S3 and gateway->GCS link, and behind the store links an HTTP
// proxy per store (StoreProxy: NewS3Proxy, NewGCSProxy) that injects store
// faults (5xx before or after committing, a reply dropped after
// committing) and records every object write in the order the store
// committed it. A seeded third of the histories write to GCS (the bucket
// GCSBucket, which the gateways' config maps to the gcs store), the others
// to S3.
//
// The workload (Workload) is clients that take an etcd lock per object
// (concurrency.Mutex; the token is the create revision of the holder's
// key) and write through random gateways; some stall past their lease
// before writing, some retry ambiguous writes with the same token. In
// every S3 history some holders write by a multipart upload through the
// gateways' S3 API instead (multipartWrite): created with their token,
// completed by the id the create answered; some of these are overtaken,
// their holder stalling past its lease between its part and its
// completion, and stale holders abort newer holders' uploads by the
// store's id with their stale token (staleAbort), which checkStaleAborts
// wants refused. The gateways therefore run with an auth config (the S3
// API needs access keys), and every REST request sends its bearer key.
// In every history some holders write by ticket instead (ticketWrite):
// they ask a random gateway for a ticket with their token (POST
// /v1/tickets, a PUT's checks up to the write) and send the bytes
// themselves to the URL it answers, the gateway's S3 link, so the S3
// proxy records the write like any other (StoreWrite.Ticket). Holders
// send at once, send twice on one ticket (the second must be refused),
// let their lock go and send past a newer holder's fence check or write
// (past a write it must be refused, but for the ETag ABA shape), send
// after the ticket expired (refused 403; one that lands is a
// ticket-expired violation), or never send; the gateways' tickets live
// two seconds (ticketExpiry, in their config file). Ticket requests are OpTickets,
// writes on tickets OpWrites, judged like every other write; a GCS bucket
// answers the request 501, and the holder writes through the gateway. The
// nemesis (Nemesis) injects at least two faults per history: SIGKILL of
// the etcd leader or a follower, SIGSTOP of a member, the leader isolated,
// a gateway cut off from etcd, 100±50 ms of delay, connections refused or
// reset, a write held between its fence check and its PUT (through the
// gateway's test-only pause hook) while its holder's lease is revoked, S3
// faults, and etcd compaction. Check runs the checkers. One documented
// limit, the ETag ABA shape of the S3 route (a stale write conditional on
// an ETag lands because the object went back to those exact bytes), is a
// named finding (etag-aba), not a violation, in an S3 history only; the
// workload produces it in histories whose writers write identical bytes
// (WorkloadConfig.SameBytes), and on GCS, whose conditions name
// generations, the same shape is a violation. A write on a ticket lands by
// the same shape for as long as its ticket lives: the same finding, told
// as a ticket's (Finding.Ticket) and counted apart (tk_aba).
//
// A seeded third of the histories run with aggressive compaction
// (Compactor): etcd compacted at its current revision every 100 ms, so
// that watches that resume or start from a revision read a moment before
// find it compacted; the HWM watcher then resynchronizes (Watcher), and
// each history's line says compaction=yes or no.
//
// Two more shapes of the workload are in WorkloadConfig, each in a seeded
// half of the suite's histories (WithShapes turns them on; the suite does
// unless ROBUSTNESS_SHAPES says otherwise): objects that exist without
// an ETag (files placed straight into versitygw's bucket directory, each
// opened by a race whose first writer is held after its fence check), and
// requests through a partner route, under the gateways' "*=plausible"
// token checks, to PartnerServer, a partner in this process that records
// what reaches it; checkPartners reads its record.
//
// The gateways' test-only switches are set through the environment
// variable FENCEGATE_UNSAFE_TEST_HOOKS (see cmd/fencegate/testhooks.go),
// which the mutation tests use to show that the checkers catch a gateway
// that swaps the observe and fence steps, drops the If-Match, or issues
// tickets that sign no condition (unconditional-ticket). Only a
// fencegate built with -tags fencegate_unsafe_hooks has them, so
// BuildBinaries builds it so; a normal build refuses to start with the
// variable set.
package robustness
