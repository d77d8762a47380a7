import { t } from 'elysia'

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
