/**
 * `text`, a compact JSON text, as Python's `json.dumps(json.loads(text))` writes it: ", " and ": "
 * between members and items, and every string with non-ASCII escaped (`ensure_ascii`:
 * `\u` and four lowercase hex digits, a surrogate pair as two). Numbers, key order and literals keep their bytes: the
 * backends that need this (Phala's proxy, TEE-PROTOCOL.md A3) write the compact text with
 * Python's own encoder, so only separators and string escapes differ.
 */
export function pythonJsonDump(text: string): string {
  let out = ''
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (c === '"') {
      const start = i
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++
      // Cut inside a string (a relay truncated the reply): not JSON, so no form of it was signed.
      if (i >= text.length) return text
      out += pythonString(JSON.parse(text.slice(start, i + 1)) as string)
    } else if (c === ',' || c === ':') {
      out += `${c} `
    } else if (c !== ' ' && c !== '\n' && c !== '\r' && c !== '\t') {
      out += c
    }
  }
  return out
}

const SHORT: Record<string, string> = { '"': '\\"', '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\b': '\\b', '\f': '\\f' }

/** Python's `json.dumps` of one string with `ensure_ascii` (its `py_encode_basestring_ascii`). */
function pythonString(value: string): string {
  let out = '"'
  for (let i = 0; i < value.length; i++) {
    const c = value[i]!
    const code = value.charCodeAt(i)
    out += SHORT[c] ?? (code < 0x20 || code > 0x7e ? `\\u${code.toString(16).padStart(4, '0')}` : c)
  }
  return `${out}"`
}
