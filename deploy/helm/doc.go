// Package helm holds fencegate's Helm chart, fencegate/, and its test:
// the chart rendered with Helm's own library for several value sets,
// and every object it renders validated against the Kubernetes schemas
// (strictly decoded into its k8s.io/api type, and validated against the
// OpenAPI document of the Kubernetes release those types come from). It
// has no Go code of its own.
package helm
