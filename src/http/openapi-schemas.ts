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
