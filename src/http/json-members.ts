/**
 * The first member name given twice in one object of `text`, a JSON text that JSON.parse has
 * accepted (so its strings are well formed); undefined when every object's names are unique.
 * JSON.parse keeps the last of two silently (RFC 8259 §4 leaves it to the parser): on an admin
 * body `{"admin": false, "admin": true}` a proxy reading the first would disagree with the
 * gateway about what was asked. Linear in the text; names are compared decoded (`"\u0061"` is `a`).
 */
export function duplicateMember(text: string): string | undefined {
  // One Set of names per open object, null per open array.
  const open: Array<Set<string> | null> = []
  let atName = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === QUOTE) {
      const start = i
      let escaped = false
      for (i++; text.charCodeAt(i) !== QUOTE; i++) {
        if (text.charCodeAt(i) === BACKSLASH) {
          escaped = true
          i++
        }
      }
      const names = open[open.length - 1]
      if (atName && names) {
        const name = escaped ? (JSON.parse(text.slice(start, i + 1)) as string) : text.slice(start + 1, i)
        if (names.has(name)) return name
        names.add(name)
        atName = false
      }
    } else if (c === OPEN_OBJECT) {
      open.push(new Set())
      atName = true
    } else if (c === OPEN_ARRAY) {
      open.push(null)
      atName = false
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      open.pop()
      atName = false
    } else if (c === COMMA) {
      atName = open[open.length - 1] != null
    }
  }
  return undefined
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_OBJECT = 0x7b
const CLOSE_OBJECT = 0x7d
const OPEN_ARRAY = 0x5b
const CLOSE_ARRAY = 0x5d
const COMMA = 0x2c
