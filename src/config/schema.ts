import { t, type Static } from 'elysia'

/** A USD amount written as a quoted decimal string with at most 9 decimals ("20", "0.40"). */
const Usd = t.String({ pattern: '^(0|[1-9][0-9]*)(\\.[0-9]{1,9})?$', description: 'USD decimal string, at most 9 decimals' })

const Plan = t.Object(
  {
    monthly_allowance: Usd,
    fusion: t.Boolean(),
  },
  { additionalProperties: false },
)

/** A token bucket: up to `burst` requests at once, refilled at `per_second`. */
const Bucket = t.Object(
  {
    burst: t.Integer({ minimum: 1, maximum: 1_000_000 }),
    per_second: t.Number({ exclusiveMinimum: 0, maximum: 1_000_000 }),
  },
  { additionalProperties: false },
)

const BucketPair = t.Object({ key: Bucket, org: Bucket }, { additionalProperties: false })

/**
 * The YAML file named by SVC_CONFIG (or the embedded default). Unknown keys are errors:
 * a typo must stop the boot rather than silently change behaviour.
 */
export const FileConfigSchema = t.Object(
  {
    // additionalProperties: false makes a key outside the id pattern an error (else it is not checked at all).
    plans: t.Record(t.String({ pattern: '^[a-z0-9][a-z0-9_-]{0,63}$' }), Plan, { minProperties: 1, additionalProperties: false }),
    bootstrap: t.Optional(
      t.Object(
        {
          org_name: t.Optional(t.String({ minLength: 1, maxLength: 200 })),
          owner_email: t.Optional(t.String({ minLength: 3, maxLength: 320 })),
        },
        { additionalProperties: false },
      ),
    ),
    limits: t.Optional(
      t.Object(
        {
          inference: t.Optional(BucketPair),
          management: t.Optional(BucketPair),
          org_inference_concurrency: t.Optional(t.Integer({ minimum: 1, maximum: 100_000 })),
        },
        { additionalProperties: false },
      ),
    ),
    ledger: t.Optional(
      t.Object(
        {
          // Prepaid credit granted to the organization created at first boot.
          bootstrap_credit: t.Optional(Usd),
          // Seconds without a heartbeat after which another instance's leases are returned.
          instance_stale_after_s: t.Optional(t.Integer({ minimum: 5, maximum: 3600 })),
        },
        { additionalProperties: false },
      ),
    ),
    auth: t.Optional(
      t.Object(
        {
          // How long a verified credential is trusted without re-reading it (other processes' revocations).
          cache_ttl_ms: t.Optional(t.Integer({ minimum: 0, maximum: 2000 })),
          cache_max_entries: t.Optional(t.Integer({ minimum: 1, maximum: 1_000_000 })),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
)

export type FileConfig = Static<typeof FileConfigSchema>
