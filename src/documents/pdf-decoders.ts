import { brotliDecompressSync, constants, createBrotliDecompress, createInflateRaw, inflateRawSync, type BrotliDecompress, type InflateRaw } from 'node:zlib'

// The PDF filters the prescan (pdf-streams.ts) decodes, each as pdf.js decodes it: in JavaScript
// byte for byte (src/core/lzw_stream.js, run_length_stream.js, ascii_85_stream.js,
// ascii_hex_stream.js; Flate in pdf-flate.ts), Brotli with node:zlib, so the count is what pdf.js
// would hold.

/** What a counting decoder wrote: its size (counted to just past the cap), the bytes it read, and the first bytes written. */
export interface Decoded {
  size: number
  read: number
  /** The first bytes written, `keep` of them at least (all when `size <= keep`). */
  head: Uint8Array
  /** Where pdf.js may decode the data two ways (Flate, pdf-flate.ts), the other reading's first bytes: `size` counts both. */
  other?: Uint8Array
  /** Flate: Huffman table entries built past what its bytes allow (pdf-flate.ts), against the document's slack. */
  tables?: number
}

/** Whether an output opens like zlib data (either reading, for Flate read two ways). */
export const opensLikeZlib = (out: Decoded) => zlibHeader(out.head) || (out.other !== undefined && zlibHeader(out.other))

/** Output kept to `keep` bytes (a stream's whole cap, for an object stream), in a buffer grown as it fills. */
export class Held {
  bytes: Uint8Array
  length = 0
  constructor(readonly keep: number) {
    this.bytes = new Uint8Array(Math.min(Math.max(0, keep), 4096))
  }
  get full(): boolean {
    return this.length >= this.keep
  }
  /** Makes room for up to `count` more bytes (zeros until written) and says how many fit. */
  room(count: number): number {
    const want = Math.min(this.keep, this.length + count)
    if (want > this.bytes.length) {
      const grown = new Uint8Array(Math.min(this.keep, Math.max(want, this.bytes.length * 2)))
      grown.set(this.bytes.subarray(0, this.length))
      this.bytes = grown
    }
    return Math.max(0, want - this.length)
  }
  view(): Uint8Array {
    return this.bytes.subarray(0, this.length)
  }
}

/**
 * LZWDecode as pdf.js's LZWStream decodes it, output counted and only its first `keep` bytes held.
 * pdf.js's quirks are its count: blocks of 512 codes, and at the end of the data every code left in
 * the block reads as 0 (one byte each); after the 4,096th entry the table stops growing but is never
 * reset unless a clear code (256) says so; `EarlyChange` goes into the code-length arithmetic as
 * given, so a value no encoder writes (a negative one, a name: NaN here) can bring the code length
 * to 0 bits, where pdf.js writes zeros without end: counted here until the cap.
 */
export function lzw(data: Uint8Array, earlyChange: number, cap: number, keep: number): Decoded {
  const values = new Uint8Array(4096)
  const lengths = new Uint16Array(4096)
  const prevCodes = new Uint16Array(4096)
  const sequence = new Uint8Array(4096)
  for (let code = 0; code < 256; code++) {
    values[code] = code
    lengths[code] = 1
  }
  const held = new Held(keep)
  let codeLength = 9
  let nextCode = 258
  let prevCode: number | null = 0
  let length = 0 // of the current sequence
  let cached = 0
  let bits = 0
  let at = 0
  let size = 0
  for (let eof = false; !eof && size <= cap; ) {
    for (let index = 0; index < 512; index++) {
      // readBits: when the data runs out the partial read is dropped and the code is null.
      let code: number | null = null
      let data32 = cached
      let count = bits
      while (count < codeLength && at < data.length) {
        data32 = (data32 << 8) | data[at++]!
        count += 8
      }
      if (count < codeLength) eof = true
      else {
        bits = count - codeLength
        cached = data32
        code = (data32 >>> bits) & ((1 << codeLength) - 1)
      }
      const exact = !held.full // the bytes written matter only while they are held
      const hasPrev = length > 0
      if (code === null || code < 256) {
        sequence[0] = code ?? 0
        length = 1
      } else if (code >= 258) {
        if (code < nextCode) {
          length = lengths[code]!
          if (exact) for (let j = length - 1, q = code; j >= 0; j--, q = prevCodes[q]!) sequence[j] = values[q]!
        } else {
          if (exact) sequence[length] = sequence[0]!
          length++
        }
      } else if (code === 256) {
        codeLength = 9
        nextCode = 258
        length = 0
        continue
      } else return { size, read: at, head: held.view() } // 257: the end of the data
      if (hasPrev) {
        // Typed arrays drop writes past the table's end and turn NaN into 0, as pdf.js's do.
        prevCodes[nextCode] = prevCode ?? 0
        lengths[nextCode] = prevCode === null ? Number.NaN : lengths[prevCode]! + 1
        values[nextCode] = sequence[0]!
        nextCode++
        const sum = nextCode + earlyChange
        codeLength = sum & (sum - 1) ? codeLength : Math.min(Math.log(sum) / 0.6931471805599453 + 1, 12) | 0
        // NaN keeps it at 0 bits: a zero byte for every code read from no data, for ever.
        if (codeLength === 0 && Number.isNaN(sum)) return { size: cap + 1, read: at, head: held.view() }
      }
      prevCode = code
      for (let j = 0, room = exact ? held.room(length) : 0; j < room; j++) held.bytes[held.length++] = sequence[j] ?? 0
      size += length
    }
  }
  return { size, read: at, head: held.view() }
}

/**
 * RunLengthDecode (ISO 32000 §7.4.5) as pdf.js's RunLengthStream reads it: a length byte n, then
 * n + 1 bytes to copy (below 128) or one byte to repeat 257 - n times (above), 128 or a lone last
 * byte ending it. A copy cut short by the end of the data still counts n + 1, as pdf.js counts it.
 */
export function runLength(data: Uint8Array, cap: number, keep: number): Decoded {
  const held = new Held(keep)
  let at = 0
  let size = 0
  while (size <= cap && at + 2 <= data.length && data[at] !== 128) {
    const n = data[at]!
    const byte = data[at + 1]!
    at += 2
    const end = n < 128 ? Math.min(at + n, data.length) : at
    const room = held.room(n < 128 ? n + 1 : 257 - n)
    if (n < 128 && room > 0) {
      // The byte, then the n that follow (zeros for those past the data's end).
      held.bytes[held.length] = byte
      held.bytes.set(data.subarray(at, Math.min(end, at + room - 1)), held.length + 1)
    } else held.bytes.fill(byte, held.length, held.length + room)
    held.length += room
    size += n < 128 ? n + 1 : 257 - n
    at = end
  }
  return { size, read: at, head: held.view() }
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

/** A two-byte zlib header pdf.js's FlateStream accepts (it ignores the window size and the checksum). */
export function zlibHeader(data: Uint8Array): boolean {
  const cmf = data[0]
  const flg = data[1]
  return cmf !== undefined && flg !== undefined && (cmf & 0x0f) === 8 && ((cmf << 8) + flg) % 31 === 0 && (flg & 0x20) === 0
}

/**
 * How many bytes `data` decompresses to, counted up to just past `cap` (the data beyond the
 * compressed stream's end is ignored), and its first `keep` bytes: Brotli, and raw deflate as
 * zlib reads it (pdf-flate.ts: pdf.js's native reading, counted where its own differs).
 */
export async function decompressedSize(data: Uint8Array, brotli: boolean, cap: number, keep: number): Promise<Decoded> {
  const held = Math.min(cap, SYNC_BYTES)
  try {
    // The usual stream, at once; past `held` zlib stops and throws.
    const options = { maxOutputLength: Math.max(1, held), finishFlush: brotli ? constants.BROTLI_OPERATION_FLUSH : constants.Z_SYNC_FLUSH }
    const out = brotli ? brotliDecompressSync(data, options) : inflateRawSync(data, options)
    return { size: out.byteLength, read: 0, head: out } // `out` is all of it
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE' && held === cap) return { size: cap + 1, read: 0, head: new Uint8Array(0) }
  }
  // A large stream, or corrupt data (pdf.js keeps what decoded before the fault): counted as a
  // stream, each chunk dropped once counted (but the first `keep` bytes), so memory stays flat.
  return new Promise(resolve => {
    const stream: InflateRaw | BrotliDecompress = brotli ? createBrotliDecompress() : createInflateRaw()
    let size = 0
    const head: Buffer[] = []
    const done = () => resolve({ size, read: 0, head: Buffer.concat(head).subarray(0, keep) })
    stream.on('data', (chunk: Buffer) => {
      if (size < keep) head.push(chunk.subarray(0, keep - size))
      size += chunk.byteLength
      if (size > cap) stream.destroy()
    })
    stream.on('error', done)
    stream.on('close', done)
    stream.end(data)
  })
}

// Output held in memory at once by the quick path (zlib builds it whole before it is counted).
export const SYNC_BYTES = 1024 * 1024
