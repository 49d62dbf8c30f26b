// Package api embeds PandaStack's OpenAPI 3.0 description of the HTTP API
// (openapi.yaml), so servers can publish it and tests can check the server
// against it. The server itself lives in internal/api.
package api

import _ "embed"

// Spec is the OpenAPI 3.0 document (YAML) describing every /v1 route.
//
//go:embed openapi.yaml
var Spec []byte
