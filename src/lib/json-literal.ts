// The inside of a JSON string literal (the text between its quotes), as the same-format
// pass-throughs read it without JSON.parse (providers/*/pass-through.ts).

/** Characters that need a closer look in a string literal: escapes, quotes, raw control characters. */
export const SPECIAL = /["\\\u0000-\u001f]/
/** As SPECIAL, or past ASCII: a literal without any is its own UTF-8, one byte per character. */
export const SPECIAL_OR_WIDE = /["\\\u0000-\u001f\u0080-\uffff]/

/** The value of a JSON string literal's inside, or undefined when it is not exactly one valid literal. */
export function parseStringLiteral(literal: string): string | undefined {
  try {
    const value: unknown = JSON.parse(`"${literal}"`)
    return typeof value === 'string' ? value : undefined
  } catch {
    return undefined
  }
}

/**
 * The UTF-8 byte length of the string a literal's inside stands for, when that inside is exactly
 * what JSON.stringify writes for it (so it can be forwarded as it is); undefined otherwise: not
 * one valid literal, or escapes JSON.stringify would not write (`\u00e9`, `\/`).
 */
export function canonicalLiteralBytes(literal: string): number | undefined {
  if (!SPECIAL_OR_WIDE.test(literal)) return literal.length
  // A lone surrogate (never in decoded UTF-8) is one JSON.stringify escapes.
  if (!SPECIAL.test(literal)) return literal.isWellFormed() ? Buffer.byteLength(literal) : undefined
  const value = parseStringLiteral(literal)
  if (value === undefined || JSON.stringify(value) !== `"${literal}"`) return undefined
  return Buffer.byteLength(value)
}
