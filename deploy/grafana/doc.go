// Package grafana holds fencegate's Grafana dashboard, fencegate.json,
// and its test: every panel's query parses with Prometheus's own PromQL
// parser once Grafana's variables are put in, and names only metrics the
// gateway exports. It has no Go code of its own.
package grafana
