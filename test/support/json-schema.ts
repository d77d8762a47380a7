// A checker for the small JSON Schema subset the hand-written OpenAPI fragments use (type,
// properties, required, items, enum), to hold real responses against the documented schemas.
// A keyword it does not know throws, so a schema feature it cannot check never passes silently.

type Schema = Record<string, unknown>

const KNOWN = new Set(['type', 'properties', 'required', 'items', 'enum', 'description', 'additionalProperties'])

function typeOf(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'array'
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number'
  return typeof value
}

/**
 * The places where `value` breaks `schema`, as "$.path: problem" lines (empty: it conforms).
 * Objects are closed unless the schema says `additionalProperties`: a field the server sends but
 * the document does not name is an error, which is the point of checking responses against it.
 */
export function schemaErrors(schema: Schema, value: unknown, path = '$'): string[] {
  for (const keyword of Object.keys(schema)) if (!KNOWN.has(keyword)) throw new Error(`${path}: the checker does not know the keyword "${keyword}"`)
  const errors: string[] = []
  const actual = typeOf(value)
  if (schema.type !== undefined) {
    const allowed = [schema.type].flat() as string[]
    if (!allowed.includes(actual) && !(actual === 'integer' && allowed.includes('number'))) return [`${path}: expected ${allowed.join(' or ')}, got ${actual}`]
  }
  if (schema.enum !== undefined && !(schema.enum as unknown[]).includes(value)) errors.push(`${path}: ${JSON.stringify(value)} is not one of ${JSON.stringify(schema.enum)}`)
  if (actual === 'array' && schema.items !== undefined) {
    ;(value as unknown[]).forEach((item, index) => errors.push(...schemaErrors(schema.items as Schema, item, `${path}[${index}]`)))
  }
  if (actual === 'object') {
    const object = value as Record<string, unknown>
    const properties = (schema.properties ?? {}) as Record<string, Schema>
    for (const name of (schema.required ?? []) as string[]) if (!(name in object)) errors.push(`${path}.${name}: required but missing`)
    for (const [name, item] of Object.entries(object)) {
      if (properties[name]) errors.push(...schemaErrors(properties[name], item, `${path}.${name}`))
      else if (schema.additionalProperties !== true) errors.push(`${path}.${name}: sent but not documented`)
    }
  }
  return errors
}
