import { Type } from '@sinclair/typebox'
import { t } from 'elysia'

// Wire schema for GET /api/v1/rate-limits (spec §4.13: "response shape: not shown", so ours).

// Elysia's `t.Integer` is a string-coercing union meant for query params; in a response it
// documents as `anyOf: [string, integer]`. These counts are plain JSON integers, so use the
// underlying TypeBox 0.34 integer (the same package `t` is built on, see STACK-NOTES §1).
const Count = Type.Integer

const RateWindow = t.Object(
  {
    limit: Count({ minimum: 1, description: 'Burst: requests allowed at once when the window is full' }),
    remaining: Count({ minimum: 0, description: 'Whole requests available now' }),
    reset_at: t.String({ format: 'date-time', description: 'When the window is full again (whole seconds, UTC)' }),
    refill_per_second: t.Number({ exclusiveMinimum: 0, description: 'Requests added back per second, as the window refills (may be fractional; steps of 0.000001)', examples: [0.5] }),
  },
  { description: 'A token bucket, read without consuming' },
)

const WindowPair = t.Object({
  key: RateWindow,
  org: RateWindow,
})

export const RateLimitsResponse = t.Object({
  inference: t.Object(WindowPair.properties, { description: 'Inference requests (chat, Fusion, web, documents): per key and per organization' }),
  management: t.Object(WindowPair.properties, { description: 'Management requests (keys, balance, this route): per key and per organization' }),
  concurrency: t.Object(
    {
      in_use: Count({ minimum: 0, description: "Inference requests of the organization in flight on this instance" }),
      limit: Count({ minimum: 1, description: 'Inference requests the organization may have in flight at once' }),
    },
    { description: 'Per-organization inference concurrency' },
  ),
})
