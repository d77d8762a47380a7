/**
 * An upstream's error text without the provider's key in it. An upstream (or a proxy before it)
 * may echo the key back, and JSON may write any of its characters escaped (`\/` by PHP's
 * json_encode, `\u0073`): matched as written only, a key with a `/` passed the scrub in the raw
 * body, and JSON.parse then decoded it into the message the client was sent (QA). Every character
 * of the key is matched as itself or as its JSON escapes, so the raw body and any text decoded
 * from it are scrubbed alike.
 */
export function withoutSecret(text: string, secret: string | undefined): string {
  if (secret === undefined || secret === '') return text
  return text.replace(secretPattern(secret), '[redacted]')
}

// A few keys per process (one per provider), asked again on every error of theirs.
const patterns = new Map<string, RegExp>()

function secretPattern(secret: string): RegExp {
  let pattern = patterns.get(secret)
  if (pattern === undefined) {
    let source = ''
    for (const character of secret) {
      const forms = [character.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&')]
      // A \u escape of four hex digits in either case, per UTF-16 unit (a character outside the
      // BMP is written as its two surrogates).
      const units = Array.from({ length: character.length }, (_, index) => character.charCodeAt(index))
      forms.push(units.map(unit => `\\\\u${unit.toString(16).padStart(4, '0').replace(/[a-f]/g, letter => `[${letter}${letter.toUpperCase()}]`)}`).join(''))
      // JSON's two-character escapes of the characters a key may hold.
      if (character === '/' || character === '"' || character === '\\') forms.push(`\\\\\\${character}`)
      source += `(?:${forms.join('|')})`
    }
    pattern = new RegExp(source, 'g')
    patterns.set(secret, pattern)
  }
  pattern.lastIndex = 0
  return pattern
}
