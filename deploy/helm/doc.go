// Package helm holds fencegate's Helm chart, fencegate/, and its tests:
// the chart rendered with Helm's own library for several value sets,
// every object it renders validated against the Kubernetes schemas
// (strictly decoded into its k8s.io/api type, and validated against the
// OpenAPI document of the Kubernetes release those types come from), the
// objects checked together (replicas, probes, grace period, selectors),
// and the fencegate.yaml it writes checked by `fencegate config check`.
// It has no Go code of its own.
package helm
