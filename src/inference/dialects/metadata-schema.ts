import { t } from 'elysia'
import { MaxCharacters } from '../../http/openapi-schemas'
import { maxCharactersPattern } from '../../lib/characters'

// OpenAI's `metadata` (Chat Completions and Responses), within OpenAI's documented limits: at
// most 16 pairs, keys of at most 64 characters, string values of at most 512. The gateway only
// echoes it (Responses) or keeps it (never forwarded), but a map OpenAI would refuse is a 400
// naming the field here too. A key's length is the key pattern's: a longer key matches no pattern
// (additionalProperties: false), and the map's own `error` says why rather than "unknown field".
// Characters are Unicode code points, as OpenAI counts them (a 64-emoji key fits): both limits are
// patterns (maxCharactersPattern, MaxCharacters), since TypeBox's maxLength counts an emoji as two.

export const METADATA_LIMITS = 'at most 16 pairs, keys of at most 64 characters, string values of at most 512 characters'

export const Metadata = t.Record(
  t.String({ pattern: maxCharactersPattern(64) }),
  MaxCharacters(512, { error: 'metadata values must be strings of at most 512 characters' }),
  {
    maxProperties: 16,
    additionalProperties: false,
    error: 'metadata takes at most 16 pairs, with keys of at most 64 characters',
    description: `Set of key-value pairs, echoed, never forwarded: ${METADATA_LIMITS} (Unicode code points: an emoji counts once; OpenAI's limits)`,
  },
)
