// Inline attachments in every dialect: base64, bare or in a data URL, at most 1 MiB decoded
// (spec §8). One check for all of them: Buffer's decoder does not refuse bad base64, it stops at
// a misplaced `=` or skips a foreign character, so a malformed attachment was silently cut short
// (and its text extracted and billed) on the routes that did not check it themselves.

export const MAX_INLINE_BYTES = 1024 * 1024

/** The image types Anthropic's API takes: its Messages format's, and so an Anthropic backend's. */
export const ANTHROPIC_IMAGE_TYPES: ReadonlySet<string> = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp'])

/** An image's media type, lowercased, with image/jpg (an alias OpenAI takes and Anthropic refuses; Python's mimetypes gives it) as image/jpeg. */
export const imageType = (mediaType: string): string => {
  const type = mediaType.toLowerCase()
  return type === 'image/jpg' ? 'image/jpeg' : type
}

// RFC 2397: media type parameters (";charset=utf-8", ";name=…") may precede ";base64".
const DATA_URL = /^data:([a-z]+\/[a-z0-9.+-]+)(?:;[a-z0-9=.+-]+)*;base64,(.*)$/is
// Base64's alphabet, padding only at the end (whitespace is removed first: line-wrapped base64 is common).
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/

/** A base64 data URL's media type (lowercased) and its data, or undefined when `value` is not one. */
export function parseDataUrl(value: string): { mediaType: string; base64: string } | undefined {
  const match = DATA_URL.exec(value)
  return match === null ? undefined : { mediaType: match[1]!.toLowerCase(), base64: match[2]! }
}

/**
 * The bytes of base64 text, refused (through `fail`, which builds the dialect's error) when it is
 * not base64 or decodes to more than MAX_INLINE_BYTES. The size is checked before decoding too.
 */
export function inlineBytes(base64: string, fail: (problem: 'malformed' | 'too-large') => Error): Uint8Array {
  const clean = base64.replace(/\s/g, '')
  // A length of 4n + 1 cannot be base64; padded text comes in whole groups of four.
  if (!BASE64.test(clean) || clean.length % 4 === 1 || (clean.endsWith('=') && clean.length % 4 !== 0)) throw fail('malformed')
  if (Math.floor((clean.length * 3) / 4) > MAX_INLINE_BYTES + 3) throw fail('too-large')
  const bytes = new Uint8Array(Buffer.from(clean, 'base64'))
  if (bytes.byteLength > MAX_INLINE_BYTES) throw fail('too-large')
  return bytes
}
