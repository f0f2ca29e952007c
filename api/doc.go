// Package api is fencegate's wire contract and shared vocabulary: fencing
// tokens and their header grammar, resource names, the problem+json body
// (RFC 9457) and the error classes that every layer maps its failures to.
//
// It imports only the standard library, so that the gateway, the token store,
// the backends and clients can all speak it without depending on each other.
package api
