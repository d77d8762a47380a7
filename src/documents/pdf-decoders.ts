// The PDF filters the prescan (pdf-streams.ts) decodes in JavaScript, each as pdf.js decodes it
// (src/core/ascii_85_stream.js, ascii_hex_stream.js), so the count is what pdf.js would hold.
// Flate and Brotli are node:zlib's.

/** What a counting decoder wrote: its size (counted to just past the cap), the bytes it read, and the first bytes written. */
export interface Decoded {
  size: number
  read: number
  /** The first bytes written, `keep` of them at least (all when `size <= keep`). */
  head: Uint8Array
}

/** ASCIIHexDecode (ISO 32000 §7.4.2): hex digits up to `>`, white space skipped, an odd last digit followed by 0. */
export function asciiHex(data: Uint8Array): Uint8Array {
  const end = Buffer.from(data.buffer, data.byteOffset, data.byteLength).indexOf(0x3e)
  const digits = Buffer.from(data.buffer, data.byteOffset, end < 0 ? data.byteLength : end).toString('latin1').replace(/[^0-9a-fA-F]/g, '')
  return Buffer.from(digits.length % 2 ? `${digits}0` : digits, 'hex')
}

/**
 * ASCII85Decode as pdf.js reads it (Ascii85Stream.readBlock), byte for byte: only its four white
 * space bytes are skipped, every other byte is a digit (`byte - 33`, unchecked), `z` at a group's
 * start is four zeros, and `~` or the end stops it, a short group padded with `u`. The
 * specification's reading (skip anything outside `!`–`u`) let one out-of-range character put the
 * count out of step with what pdf.js inflates (regression QA). Past `cap` bytes (`z` writes four
 * for one) it stops, `cap + 1` bytes long.
 */
export function ascii85(data: Uint8Array, cap: number): Uint8Array {
  const out = Buffer.alloc(Math.min(Math.ceil(data.byteLength * 4), cap + 4) + 8)
  const group = new Array<number>(5)
  let length = 0
  let at = 0
  const next = () => {
    while (at < data.byteLength && (data[at] === 0x20 || data[at] === 0x09 || data[at] === 0x0d || data[at] === 0x0a)) at++
    return at < data.byteLength ? data[at++]! : -1
  }
  while (length <= cap) {
    let byte = next()
    if (byte === -1 || byte === 0x7e) break
    if (byte === 0x7a) {
      length += 4 // zeros: the buffer starts filled with them
      continue
    }
    group[0] = byte
    let count = 1
    for (; count < 5; count++) {
      byte = next()
      group[count] = byte
      if (byte === -1 || byte === 0x7e) break
    }
    let value = 0
    for (let index = 0; index < 5; index++) value = value * 85 + ((index < count ? group[index]! : 0x75) - 0x21)
    for (let index = 3; index >= 0; index--) {
      out[length + index] = value & 0xff
      value >>= 8
    }
    length += count - 1
    if (count < 5) break
  }
  return out.subarray(0, Math.min(length, cap + 1))
}
