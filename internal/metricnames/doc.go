// Package metricnames keeps the list of metrics that a serving gateway
// exports, deploy/testdata/metrics.txt, true to the code: its test wires
// a gateway on a real etcd and S3 server as `fencegate serve` does, with
// every part that registers metrics (partner routes, locks, multipart
// uploads, the store's space, the log queue, the mark evictor), and
// fails when the list differs from what the gateway's registry
// describes. The deploy module checks every metric that an alert rule
// or a dashboard panel names against that list, so that neither can
// name a metric the gateway does not export. The package has no code:
// only its test.
package metricnames
