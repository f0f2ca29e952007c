// Package prometheus holds fencegate's Prometheus alert rules,
// alerts.yaml, and their tests: promtool's unit tests (alerts_test.yaml,
// each rule firing and not firing), and a check that every rule names
// only metrics the gateway exports. It has no Go code of its own.
package prometheus
