import type { OpenAPIV3 } from 'openapi-types'

// OpenAPI fragments for the OAuth endpoints, whose bodies are read by hand (form-encoded, and
// errors in the RFC 6749 shape), so Elysia has no schema to document them from.

const OAUTH_ERROR: OpenAPIV3.SchemaObject = {
  type: 'object' as const,
  properties: { error: { type: 'string', description: 'RFC 6749 §5.2 error code' }, error_description: { type: 'string' } },
  required: ['error'],
}

export function jsonDoc(description: string, properties: Record<string, OpenAPIV3.SchemaObject> = {}): OpenAPIV3.ResponseObject & OpenAPIV3.RequestBodyObject {
  return { description, content: { 'application/json': { schema: { type: 'object' as const, properties } } } }
}

/** A form-encoded body (OAuth endpoints take no JSON). */
export function formDoc(fields: Record<string, 'string'>): OpenAPIV3.RequestBodyObject {
  const schema = { type: 'object' as const, properties: Object.fromEntries(Object.keys(fields).map(name => [name, { type: 'string' as const }])) }
  return { required: true, content: { 'application/x-www-form-urlencoded': { schema } } }
}

export function oauthResponses(status: number, description: string): OpenAPIV3.ResponsesObject {
  return {
    [status]: jsonDoc(description),
    400: { description: 'OAuth error (invalid_request, invalid_grant, invalid_scope, …)', content: { 'application/json': { schema: OAUTH_ERROR } } },
    401: { description: 'invalid_client', content: { 'application/json': { schema: OAUTH_ERROR } } },
  }
}

/** An HTML page response. */
export function htmlDoc(description: string): OpenAPIV3.ResponseObject {
  return { description, content: { 'text/html': { schema: { type: 'string' as const } } } }
}
