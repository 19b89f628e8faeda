package openapi

import (
	_ "embed"

	"github.com/valyala/fasthttp"
)

// Document is the OpenAPI 3.1 document of both services (openapi.yaml).
//
//go:embed openapi.yaml
var Document []byte

// Path is where every listener serves the document.
const Path = "/openapi.yaml"

// ContentType is the document's media type (RFC 9512).
const ContentType = "application/yaml"

// Serve answers GET /openapi.yaml with the document. It is the same on
// every listener: the tags say which listener answers an operation.
func Serve(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType(ContentType)
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, "no-cache")
	ctx.SetBody(Document)
}
