import { t } from 'elysia'
import { MaxCharacters } from '../http/openapi-schemas'
import { EXPIRES_IN_FORMS } from './expiry'
import { KEY_NAME_MAX_CHARACTERS } from './request'

// Wire schemas for the key routes (spec §2.1, §4.1–4.3). Unknown body fields are rejected.

// The name's real limit (KEY_NAME_MAX_CHARACTERS code points, after trimming) is checked in
// parseKeyOptions; this bound only refuses an absurd raw string before any work. It counts UTF-16
// code units (as TypeBox does) and leaves room for two units per character plus padding.
const NAME_RAW_MAX_LENGTH = 1000

export const CreateKeyBody = t.Object(
  {
    name: t.String({
      minLength: 1,
      maxLength: NAME_RAW_MAX_LENGTH,
      pattern: '\\S',
      error: `name must be a nonblank string of at most ${KEY_NAME_MAX_CHARACTERS} characters`,
      description: `At most ${KEY_NAME_MAX_CHARACTERS} characters (Unicode code points), counted after surrounding whitespace is trimmed; the name is stored trimmed. maxLength bounds only the raw, untrimmed string`,
      examples: ['ci-deploy'],
    }),
    // No `default` on these bodies' fields: Elysia applies a schema's defaults to a copy of the body,
    // and that copy takes a `__proto__` key as its prototype, past additionalProperties (QA: its
    // nested fields were read as the body's). The handler applies the defaults.
    admin: t.Optional(t.Boolean({ error: 'admin must be a boolean', description: 'Default false' })),
    expires_in: t.Optional(MaxCharacters(64, { description: `One of: ${EXPIRES_IN_FORMS}. Default never. A timestamp is kept to the millisecond (further fraction digits are truncated); a leap second, 23:59:60 UTC at a month's end, counts as the next second.`, examples: ['30d'] })),
    spend_cap_period: t.Optional(
      t.Union([t.Literal('daily'), t.Literal('monthly'), t.Literal('overall')], { error: 'spend_cap_period must be daily, monthly or overall' }),
    ),
    spend_cap_nanos: t.Optional(
      t.String({
        pattern: '^[1-9][0-9]{0,18}$',
        error: 'spend_cap_nanos must be a positive decimal integer string of USD nanos',
        description: 'Positive decimal string, USD nanos (1000000000 = 1 USD), at most 9223372036854775807; requires spend_cap_period',
        examples: ['5000000000'],
      }),
    ),
  },
  { additionalProperties: false },
)

const KeyFields = {
  id: t.String({ format: 'uuid' }),
  name: t.String(),
  status: t.Union([t.Literal('active'), t.Literal('expired'), t.Literal('revoked')]),
  created_at: t.String({ format: 'date-time' }),
  admin: t.Boolean(),
  expires_at: t.Optional(t.String({ format: 'date-time' })),
  last_used_at: t.Optional(t.String({ format: 'date-time', description: 'Approximate: recorded at most once a minute' })),
  revoked_at: t.Optional(t.String({ format: 'date-time' })),
  spend_cap_period: t.Optional(t.Union([t.Literal('daily'), t.Literal('monthly'), t.Literal('overall')])),
  spend_cap_nanos: t.Optional(t.String({ pattern: '^[1-9][0-9]*$' })),
}

export const KeyView = t.Object(KeyFields)
export const CreatedKeyView = t.Object({ ...KeyFields, token: t.String({ description: 'The secret (z_sk_…), shown only in this response' }) })

export const CreateKeyResponse = t.Object({ key: CreatedKeyView })
export const ListKeysResponse = t.Object({ keys: t.Array(KeyView) })
export const KeyIdParams = t.Object({ key_id: t.String({ format: 'uuid', error: 'key_id must be a UUID' }) })
