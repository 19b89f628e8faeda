// Package contract checks the running binaries against pkg/openapi's
// document: every route and status it lists is exercised against a real
// gateway and order service, and every answer is validated against it.
package contract
