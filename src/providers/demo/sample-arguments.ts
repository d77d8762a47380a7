/** How deep the sampler follows nested schemas (tool schemas are shallow; cycles are not followed). */
const MAX_DEPTH = 8

/**
 * Arguments for a demo tool call that satisfy a JSON Schema's required properties with simple
 * values: `const`, then the first `enum` value, then `default`, then a value of the declared
 * type ("demo", the minimum or 1, true, null, the smallest allowed array). Optional properties
 * are left out. Always returns an object, as Chat Completions and Messages both require.
 */
export function sampleArguments(schema: Record<string, unknown>): Record<string, unknown> {
  const value = sampleValue(schema, 0, schema)
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {}
}

/** A value for a structured-output schema, by the same rules (any type at the top). */
export function sampleJson(schema: Record<string, unknown>): unknown {
  return sampleValue(schema, 0, schema)
}

// Strings of the formats structured-output schemas use (zod's email(), iso.datetime()…), valid as written.
const FORMATTED: Record<string, string> = {
  'date-time': '2026-01-01T00:00:00Z',
  date: '2026-01-01',
  time: '00:00:00',
  email: 'demo@example.com',
  uri: 'https://example.com/demo',
  uuid: '00000000-0000-4000-8000-000000000000',
  hostname: 'example.com',
  ipv4: '192.0.2.1',
  ipv6: '2001:db8::1',
}

function sampleValue(schema: unknown, depth: number, root: Record<string, unknown>): unknown {
  if (typeof schema !== 'object' || schema === null || depth > MAX_DEPTH) return 'demo'
  const node = schema as Record<string, unknown>
  // A local reference (`#/$defs/Name`, `#/definitions/Name`), as generated schemas write shared parts.
  if (typeof node.$ref === 'string') return sampleValue(resolveRef(root, node.$ref), depth + 1, root)
  if ('const' in node) return node.const
  if (Array.isArray(node.enum) && node.enum.length > 0) return node.enum[0]
  if ('default' in node) return node.default
  for (const key of ['anyOf', 'oneOf', 'allOf']) {
    const options = node[key]
    if (Array.isArray(options) && options.length > 0) return sampleValue(options[0], depth + 1, root)
  }
  const declared = Array.isArray(node.type) ? node.type.find(type => type !== 'null') ?? node.type[0] : node.type
  const type = declared ?? (typeof node.properties === 'object' ? 'object' : 'string')
  switch (type) {
    case 'string':
      return sampleString(node)
    case 'integer':
    case 'number':
      return sampleNumber(node, type === 'integer')
    case 'boolean':
      return true
    case 'null':
      return null
    case 'array': {
      const count = typeof node.minItems === 'number' ? node.minItems : 0
      return Array.from({ length: count }, () => sampleValue(node.items, depth + 1, root))
    }
    case 'object': {
      const properties = typeof node.properties === 'object' && node.properties !== null ? (node.properties as Record<string, unknown>) : {}
      const required = Array.isArray(node.required) ? node.required.filter((name): name is string => typeof name === 'string') : []
      return Object.fromEntries(required.map(name => [name, sampleValue(properties[name], depth + 1, root)]))
    }
    default:
      return 'demo'
  }
}

function resolveRef(root: Record<string, unknown>, ref: string): unknown {
  if (!ref.startsWith('#')) return undefined
  let node: unknown = root
  for (const segment of ref.slice(1).split('/').filter(part => part !== '')) {
    if (typeof node !== 'object' || node === null) return undefined
    node = (node as Record<string, unknown>)[segment.replaceAll('~1', '/').replaceAll('~0', '~')]
  }
  return node
}

function sampleString(node: Record<string, unknown>): string {
  const formatted = typeof node.format === 'string' && Object.hasOwn(FORMATTED, node.format) ? FORMATTED[node.format] : undefined
  if (formatted !== undefined) return formatted
  const minimum = typeof node.minLength === 'number' ? node.minLength : 0
  const maximum = typeof node.maxLength === 'number' ? node.maxLength : Number.POSITIVE_INFINITY
  const base = 'demo'.padEnd(minimum, 'o')
  return base.slice(0, Math.max(minimum, Math.min(base.length, maximum)))
}

function sampleNumber(node: Record<string, unknown>, integer: boolean): number {
  let value = 1
  if (typeof node.minimum === 'number') value = node.minimum
  else if (typeof node.exclusiveMinimum === 'number') value = node.exclusiveMinimum + 1
  if (typeof node.maximum === 'number' && value > node.maximum) value = node.maximum
  return integer ? Math.ceil(value) : value
}
