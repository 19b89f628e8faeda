// Package openapi is the HTTP contract of both services: the OpenAPI 3.1
// document (openapi.yaml, embedded), the handler that serves it on every
// listener, and the rule for ids in paths the document states.
package openapi
