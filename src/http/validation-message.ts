import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors'

// TypeBox reports a value that no variant of a union accepts as one "Expected union value", and
// Elysia's summary lists the variants' kinds: `max_tokens: 0` read "should be one of: 'integer',
// 'null'", which 0 is. The useful message is in the variant the value was meant for.

/** The value is not of this variant's kind at all (at the union's own path). */
const KIND = new Set<ValueErrorType>([
  ValueErrorType.Array, ValueErrorType.Boolean, ValueErrorType.Integer, ValueErrorType.Null, ValueErrorType.Number,
  ValueErrorType.Object, ValueErrorType.String, ValueErrorType.Undefined,
])

/** What a failed union comes down to: one error to report, or the choices when none stands out. */
export type Explained = { error: ValueError } | { path: string; choices: string[] }

/**
 * Follows a union's failure into the variant the value was meant for: the one it fails for
 * another reason than being of another kind (0 is an integer below the minimum), and whose
 * discriminating literal it does not contradict (a message's role), preferring one whose
 * literal it names. When no variant is left,
 * the choices at the failing path: the discriminator's values, or the variants' kinds.
 */
export function explainUnion(error: ValueError, depth = 0): Explained {
  if (error.type !== ValueErrorType.Union || error.errors.length === 0 || depth > 8) return { error }
  const schemas = (error.schema.anyOf ?? []) as Array<Record<string, unknown>>
  const variants = error.errors.map(iterator => [...iterator])
  const meant = variants
    .map((errors, index) => ({ errors, claimed: claims(schemas[index], error.value) }))
    .filter(({ errors }) => errors.length > 0 && !errors.some(each => mismatches(each, error.path)))
  if (meant.length > 0) {
    // A variant whose discriminating literal the value names ({type: "custom"}) is the one
    // meant, however many errors it has; otherwise the one with the fewest.
    meant.sort((a, b) => Number(b.claimed) - Number(a.claimed) || a.errors.length - b.errors.length)
    return explainUnion(meant[0]!.errors[0]!, depth + 1)
  }
  // Every variant contradicts the value: a discriminator's values, else the kinds of the union.
  const literals = variants.flatMap(errors => errors.filter(each => isLiteralChoice(each) && isOwn(each, error.path)))
  if (literals.length > 0) return { path: literals[0]!.path, choices: [...new Set(literals.flatMap(literalValues))] }
  return { path: error.path, choices: [...new Set(((error.schema.anyOf ?? []) as Array<Record<string, unknown>>).flatMap(kindsOf))] }
}

/** Whether an object variant has a literal property (a `type: "custom"`) that the value sets to one of its values. */
function claims(schema: Record<string, unknown> | undefined, value: unknown): boolean {
  if (schema === undefined || typeof value !== 'object' || value === null) return false
  const properties = (schema.properties ?? {}) as Record<string, Record<string, unknown>>
  for (const [name, property] of Object.entries(properties)) {
    const given = (value as Record<string, unknown>)[name]
    if (given === undefined || given === null) continue
    const literals = 'const' in property ? [property.const] : ((property.anyOf ?? []) as Array<Record<string, unknown>>).filter(each => 'const' in each).map(each => each.const)
    if (literals.includes(given)) return true
  }
  return false
}

/**
 * An error that says this variant is not the one meant: another kind here, or another value of
 * its discriminator, the union's own literal or a literal property of the variant (`type`,
 * `role`). A literal deeper down is a mistake inside the variant meant: an image part's
 * `image_url.detail` of "ultra" once ruled the image part out, and the message listed every
 * part type with the details.
 */
function mismatches(error: ValueError, unionPath: string): boolean {
  if (KIND.has(error.type)) return error.path === unionPath
  return isLiteralChoice(error) && isOwn(error, unionPath)
}

/** At the union's path or a property of it: where a variant's discriminator is. */
function isOwn(error: ValueError, unionPath: string): boolean {
  return error.path === unionPath || error.path.slice(0, error.path.lastIndexOf('/')) === unionPath
}

/** A literal mismatch, or a union of literals none of which matched (a role of several values). */
function isLiteralChoice(error: ValueError): boolean {
  if (error.type === ValueErrorType.Literal) return true
  return error.type === ValueErrorType.Union && ((error.schema.anyOf ?? []) as Array<Record<string, unknown>>).every(variant => 'const' in variant)
}

function literalValues(error: ValueError): string[] {
  const schemas = error.type === ValueErrorType.Literal ? [error.schema] : ((error.schema.anyOf ?? []) as Array<Record<string, unknown>>)
  return schemas.map(schema => JSON.stringify(schema.const))
}

/** A variant's literal or kind; a nested union's, each (a nullable choice of literals lists them and null). */
function kindsOf(schema: Record<string, unknown>): string[] {
  if ('const' in schema) return [JSON.stringify(schema.const)]
  if (Array.isArray(schema.anyOf)) return (schema.anyOf as Array<Record<string, unknown>>).flatMap(kindsOf)
  return [typeof schema.type === 'string' ? schema.type : 'another shape']
}

/** The schema keyword holding a pattern's meaning (see plainPattern). */
export const PATTERN_MEANING = 'x-pattern-meaning'

/**
 * A string pattern with what it means in plain words, to complete "must be …": a value that
 * fails it is told that meaning (in config problems, request errors and tool errors alike), never
 * the regular expression. Kept as an OpenAPI vendor extension, so the published schemas stay valid.
 */
export function plainPattern(pattern: string, meaning: string): { pattern: string; [PATTERN_MEANING]: string } {
  return { pattern, [PATTERN_MEANING]: meaning }
}

/** One failure in words for whoever wrote the value: TypeBox's message ("Expected string"), but a pattern's meaning instead of its regex. */
export function problemOf(error: ValueError): string {
  if (error.type !== ValueErrorType.StringPattern) return error.message
  const meaning = (error.schema as Record<string, unknown>)[PATTERN_MEANING]
  return typeof meaning === 'string' ? `must be ${meaning}` : 'is not in the expected form'
}

/** The value is of another kind than the schema's (a number for a string): said as TypeBox says it. */
export function isKindError(error: ValueError): boolean {
  return KIND.has(error.type)
}

/** The choices of an explained union as words: "one of a, b", or the only one ("an object", "\"json_schema\""). */
export function choiceText(choices: string[]): string {
  if (choices.length !== 1) return `one of ${choices.join(', ')}`
  const only = choices[0]!
  if (only.startsWith('"') || only === 'null') return only
  return `${/^[aeiou]/.test(only) ? 'an' : 'a'} ${only}`
}
