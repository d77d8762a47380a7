/**
 * Characters in `text` as a person reading it counts them: Unicode code points (an emoji is one,
 * where `length` counts two UTF-16 units). The string iterator yields one per code point, a lone
 * surrogate once.
 */
export function characterCount(text: string): number {
  let count = 0
  for (const _ of text) count++
  return count
}

/**
 * `text` cut to at most `max` UTF-16 units (String#slice's measure), one less where the cut would
 * split a surrogate pair: a lone surrogate is not Unicode text, and strict JSON parsers and
 * tokenizers refuse it.
 */
export function cutText(text: string, max: number): string {
  if (text.length <= max) return text
  const last = text.charCodeAt(max - 1)
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max)
}

/**
 * Why `name` (a key's, an organization's) cannot be stored and shown as typed, or undefined. Names
 * are printed raw in listings and terminals (`svc orgs show`, `svc keys list`): C0, DEL and C1
 * (U+0080–U+009F, e.g. the 8-bit CSI U+009B) are all terminal controls, with which a name could
 * clear the screen or print a fake line. An unpaired surrogate cannot be stored as UTF-8: the
 * database would hand back U+FFFD.
 */
export function nameTextProblem(name: string): string | undefined {
  // Blank includes invisible: a name of only format characters (zero-width space, word joiner,
  // BOM, soft hyphen, Hangul filler: Default_Ignorable_Code_Point) shows as empty in every listing.
  if (/^[\s\p{Default_Ignorable_Code_Point}]*$/u.test(name)) return 'must not be blank (whitespace or invisible characters only)'
  if (/[\u0000-\u001f\u007f-\u009f]/.test(name)) return 'must not contain control characters'
  if (!name.isWellFormed()) return 'must be valid Unicode text (no unpaired surrogates)'
  return undefined
}

/**
 * A JSON Schema `pattern` for strings of at most `max` characters as characterCount counts them
 * (code points, a lone surrogate once). TypeBox compiles `pattern` and measures `maxLength` in
 * UTF-16 units (`new RegExp(pattern)`, no `u` flag), where an emoji counts two, so a schema limit
 * in characters has to be this pattern. Each alternative consumes a surrogate pair, a lone high
 * surrogate or any other unit, and no text matches two of them, so a long string fails in linear
 * time, never by backtracking. Under the `u` flag (Ajv, OpenAPI tools) the pair alternative never
 * matches and the last one takes a whole code point: the same count, so the document means what
 * the route does.
 */
export function maxCharactersPattern(max: number): string {
  return `^(?:[\\uD800-\\uDBFF][\\uDC00-\\uDFFF]|[\\uD800-\\uDBFF](?![\\uDC00-\\uDFFF])|[^\\uD800-\\uDBFF]){0,${max}}$`
}
