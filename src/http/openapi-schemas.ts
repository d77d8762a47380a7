import { withHeaders } from '@elysiajs/openapi'
import { Kind, Type, type IntegerOptions, type StringOptions, type TSchema } from '@sinclair/typebox'
import { t } from 'elysia'
import { maxCharactersPattern } from '../lib/characters'
import { plainPattern } from './validation-message'

/**
 * A JSON integer, for request bodies and replies. Elysia's `t.Integer` also accepts a numeric
 * string and converts it: a Transform, and one Transform anywhere in a body schema makes Elysia
 * run TypeBox's Decode over the whole body on every request (~3% of the chat path's CPU), and
 * documents the field as "string or integer". JSON clients send numbers (OpenAI and Anthropic
 * reject "64" for max_tokens too).
 */
export const JsonInteger = (options?: IntegerOptions) => Type.Integer(options)

/**
 * A string of at most `max` characters, counted as Unicode code points as JSON Schema's maxLength
 * counts them (an emoji is one). TypeBox's maxLength counts UTF-16 units (an emoji is two), so the
 * limit is a pattern (maxCharactersPattern), and a longer value is told "must be at most `max`
 * characters", never the expression. For limits of some thousands at most: JavaScriptCore runs
 * such a pattern slowly past ~100 000 (and refuses a 4 Mi-unit string that fits 4 Mi), so a size
 * cap in MiB stays a maxLength, in UTF-16 units.
 */
export const MaxCharacters = (max: number, options?: StringOptions) =>
  Type.String({ ...options, ...plainPattern(maxCharactersPattern(max), `at most ${max} characters`) })

/**
 * A reply schema that documents the route in OpenAPI but is not checked at run time. Elysia
 * otherwise checks (and encodes) every returned object against the route's `response` schema, a
 * walk of the whole reply on every request (~2.5% of the chat path's CPU); the dialect encoders
 * build these objects, and the tests read them back through the official SDKs.
 */
export function documentedOnly<T extends TSchema>(schema: T): T {
  // What t.NoValidate sets, but not enumerable, so it stays out of the OpenAPI JSON.
  Object.defineProperty(schema, 'noValidate', { value: true, enumerable: false })
  return schema
}

/**
 * Writes on every route's reply schemas the `additionalProperties: false` that Elysia's response
 * validator gives an object schema without one (elysia/dist/schema.mjs, getSchemaValidator), so
 * it is there from the start. Elysia writes it on the schema object itself, which /openapi.json
 * describes and several routes share (the error envelopes), when it builds a route's validator at
 * that route's first request; the document is built once, at its first fetch. Without this, which
 * routes had run before then decided the document, and two instances could serve different ones.
 */
export function settleReplySchemas(routes: ReadonlyArray<{ hooks: { response?: unknown } }>): void {
  for (const { hooks } of routes) {
    const response = hooks.response
    if (typeof response !== 'object' || response === null) continue
    const schemas: unknown[] = Kind in response ? [response] : Object.values(response)
    for (const schema of schemas) {
      if (typeof schema === 'object' && schema !== null && (schema as TSchema).type === 'object' && !('additionalProperties' in schema)) (schema as TSchema).additionalProperties = false
    }
  }
}

/** The `/api/v1` error envelope (ARCHITECTURE.md §10). */
export const ErrorResponse = t.Object(
  {
    error: t.Object({
      code: t.String({ description: 'One of the closed table of error codes', examples: ['invalid_request'] }),
      message: t.String(),
      param: t.Optional(t.String({ description: 'The offending field, when one is to blame' })),
      request_id: t.String(),
    }),
  },
  { description: 'Error' },
)

/** The OpenAI error envelope used by /v1 routes (their SDKs parse it). */
export const OpenAIErrorResponse = t.Object(
  {
    error: t.Object({
      message: t.String(),
      type: t.String({ examples: ['invalid_request_error'] }),
      param: t.Union([t.String(), t.Null()]),
      code: t.String({ description: 'One of the closed table of error codes' }),
    }),
  },
  { description: 'Error' },
)

/** Anthropic's error envelope used by /v1/messages routes (its SDK parses it). */
export const AnthropicErrorResponse = t.Object(
  {
    type: t.Literal('error'),
    error: t.Object({
      type: t.String({ examples: ['invalid_request_error'], description: 'Anthropic error type: invalid_request_error, authentication_error, permission_error, not_found_error, request_too_large, rate_limit_error, billing_error, api_error, overloaded_error' }),
      message: t.String(),
    }),
    request_id: t.String(),
  },
  { description: 'Error' },
)

/**
 * What a 429 carries (spec §7, §8; src/limits/headers.ts), documented on every rate-limited route.
 * Plain JSON integers: `t.Integer` is a numeric-string transform, documented as "a string of
 * format integer, default 0, or an integer" (no such format; a default below Retry-After's minimum).
 */
const RATE_LIMIT_HEADERS = {
  'Retry-After': JsonInteger({ minimum: 1, description: 'Whole seconds to wait before retrying' }),
  'X-RateLimit-Limit': JsonInteger({ minimum: 1, description: 'The binding bucket’s burst (also on successful responses)' }),
  'X-RateLimit-Remaining': JsonInteger({ minimum: 0, description: 'Whole requests left in that bucket' }),
  'X-RateLimit-Reset': JsonInteger({ description: 'Unix time in seconds at which that bucket is full again' }),
}

/**
 * What a 429 adds when it may be `insufficient_quota` (src/http/errors.ts renderError): the
 * official SDKs retry every 429 unless told not to, and an unfunded account will not fund itself;
 * money only held by calls in flight comes back (billing/ledger-rules.ts).
 */
const QUOTA_HEADERS = {
  'X-Should-Retry': t.Union([t.Literal('false'), t.Literal('true')], {
    description:
      'Sent with insufficient_quota only. false: no funds or allowance left, or a spend cap reached (a daily or monthly cap with Retry-After until its reset): retrying sooner will not help. ' +
      'true: what is left is held by calls in flight or leased by another gateway instance; retry after Retry-After (2 or 10 s). Absent on rate_limited',
  }),
}

/** The challenge renderError (src/http/errors.ts) puts on every 401 of the API (RFC 9110 §11.6.1 requires one). */
const BEARER_CHALLENGE = {
  'WWW-Authenticate': t.Literal('Bearer', { description: 'Send the credential as `Authorization: Bearer …`' }),
}

/** A 401 in `envelope`, with its WWW-Authenticate challenge. */
export function unauthorized<T extends TSchema>(envelope: T) {
  return withHeaders(envelope, BEARER_CHALLENGE)
}

/**
 * The answers of the auth step (src/http/auth.ts) that every authenticated route can give, in the
 * route's error envelope: 401 bad credential, 403 X-Org-ID mismatch or no admin authority, 429
 * with the rate-limit headers, 503 when credentials cannot be read. `billed`: the route spends
 * from the balance (or refuses an organization with none), so its 429 may be insufficient_quota.
 */
export function authErrors<T extends TSchema>(envelope: T, options: { billed?: boolean } = {}) {
  const refusal = options.billed === true ? { ...RATE_LIMIT_HEADERS, ...QUOTA_HEADERS } : RATE_LIMIT_HEADERS
  return { 401: unauthorized(envelope), 403: envelope, 429: withHeaders(envelope, refusal), 503: envelope }
}

/** A reply documented with `Cache-Control: no-store` (balance, attestation, parsed documents: spec §4.4, §4.8, §4.9). */
export function noStore<T extends TSchema>(schema: T) {
  return withHeaders(schema, { 'Cache-Control': t.Literal('no-store', { description: 'Never cached: the reply is request-local or live' }) })
}
