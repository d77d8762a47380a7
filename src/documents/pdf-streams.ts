import { brotliDecompressSync, constants, createBrotliDecompress, createInflateRaw, inflateRawSync, type BrotliDecompress, type InflateRaw } from 'node:zlib'

// The PDF stream bomb defence (SECURITY-NOTES §5): a 1 MB PDF whose one content stream inflates
// to a gigabyte of spaces took pdf.js past 2 GB, and nothing else bounds what a stream inflates
// to (zips have their running cap, zip-guard.ts). So before pdf.js builds anything, every stream
// it could decompress is decompressed here, its output counted and thrown away, under a cap per
// stream and a running cap for the document.

/**
 * The most bytes one PDF stream may decompress to. A page's content stream is tens of KB, a dense
 * vector drawing a few MB, a large image (which the gateway never decodes, but cannot tell from
 * a content stream) tens of MB.
 */
export const MAX_PDF_STREAM_BYTES = 64 * 1024 * 1024
/** The most bytes all of a PDF's streams may decompress to together (a 1,500-page text PDF: ~10 MB). */
export const MAX_PDF_INFLATED_BYTES = 256 * 1024 * 1024

export interface StreamLimits {
  maxStreamBytes: number
  maxInflatedBytes: number
}

const defaults: StreamLimits = { maxStreamBytes: MAX_PDF_STREAM_BYTES, maxInflatedBytes: MAX_PDF_INFLATED_BYTES }
const mb = (bytes: number) => `${Math.round(bytes / (1024 * 1024))} MiB`
const tooMuchInAll = (limits: StreamLimits) => `the PDF's streams decompress to more than ${mb(limits.maxInflatedBytes)} in all (a decompression bomb, or a document too large to read)`

/**
 * Why the PDF's streams are refused, or undefined. Every `stream` keyword in the file is
 * looked at, not only those the object structure shows: pdf.js opens whatever object a
 * cross-reference offset points at, inside another stream's data too, and takes a stream's extent
 * from its /Length (an indirect one included), so a stream is decompressed from its start to as
 * far as its data goes, never stopped at an `endstream` written inside it.
 */
export async function measurePdfStreams(bytes: Uint8Array, limits: StreamLimits = defaults): Promise<string | undefined> {
  const file = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  let total = 0
  for (let at = file.indexOf('stream', 0, 'latin1'); at >= 0; at = file.indexOf('stream', at + 6, 'latin1')) {
    if (!boundary(file[at - 1]) || !boundary(file[at + 6])) continue
    const start = dataStart(file, at + 6)
    if (start >= file.length) continue
    const dictionary = streamDictionary(file, at)
    const filters = filtersOf(dictionary)
    if (filters.filter(name => EXPANDING.has(name)).length > 1) return `the PDF compresses a stream twice over (${filters.join(', ')}), as only a decompression bomb does`
    let data: Uint8Array = file.subarray(start)
    let codec = filters[0]
    if ((codec === 'AHx' || codec === 'A85') && EXPANDING.has(filters[1] ?? '')) {
      // An ASCII layer in front: what it decodes to is the compressed data, and counts as output too.
      // Only up to where pdf.js stops: its end character (`>`, or any `~`), else the stream's direct
      // /Length. Decoding the rest of the file for every such stream made the prescan quadratic
      // (regression QA: 60,000 empty streams took 11.6 s).
      const marker = file.indexOf(codec === 'AHx' ? '>' : '~', start, 'latin1')
      const end = marker >= 0 ? marker + 1 : streamEnd(file, start, dictionary)
      data = codec === 'AHx' ? asciiHex(file.subarray(start, end)) : ascii85(file.subarray(start, end))
      total += data.byteLength
      if (total > limits.maxInflatedBytes) return tooMuchInAll(limits)
      codec = filters[1]
    }
    const brotli = codec === 'BrotliDecode'
    // pdf.js inflates data that starts with a zlib header under a Flate filter, and the header alone
    // tells (a filter named through a reference or with #-escapes too). LZW and RunLength streams
    // are left to the pool's watchdog.
    if (!brotli && !zlibHeader(data)) continue
    const cap = Math.min(limits.maxStreamBytes, limits.maxInflatedBytes - total)
    const out = await decompressedSize(brotli ? data : data.subarray(2), brotli, cap)
    if (out.size > limits.maxStreamBytes) return `a stream in the PDF decompresses to more than ${mb(limits.maxStreamBytes)} (a decompression bomb, or a document too large to read)`
    total += out.size
    if (total > limits.maxInflatedBytes) return tooMuchInAll(limits)
    // Raw pixels may open like a zlib header (#18191A, regression QA), and pdf.js here decodes no
    // image: an image's output is counted, not read as compressed again. A stream marked as an
    // image but read as content gains nothing else: the caps above still hold.
    if (out.stacked && !(dictionary !== undefined && isImage(ownEntries(dictionary)))) return 'the PDF compresses a stream twice over (its decompressed data is compressed again), as only a decompression bomb does'
  }
  return undefined
}

/** Filters that can make data larger, by far: each one's output is what must be counted. */
const EXPANDING = new Set(['FlateDecode', 'Fl', 'LZWDecode', 'LZW', 'BrotliDecode', 'RunLengthDecode', 'RL'])
const NAMES: Record<string, string> = { ASCIIHexDecode: 'AHx', ASCII85Decode: 'A85' }

const WHITE = new Set([0x00, 0x09, 0x0a, 0x0c, 0x0d, 0x20])
const DELIMITER = new Set([0x28, 0x29, 0x3c, 0x3e, 0x5b, 0x5d, 0x7b, 0x7d, 0x2f, 0x25])
export const boundary = (byte: number | undefined) => byte === undefined || WHITE.has(byte) || DELIMITER.has(byte)

/** Where pdf.js starts a stream's data: after the first end of line at or after the keyword's end (its Lexer.skipToNextLine). */
export function dataStart(file: Buffer, at: number): number {
  for (; at < file.length; at++) {
    if (file[at] === 0x0d) return file[at + 1] === 0x0a ? at + 2 : at + 1
    if (file[at] === 0x0a) return at + 1
  }
  return at
}

/**
 * The dictionary just before a `stream` keyword, its names' #-escapes decoded; undefined when
 * there is none to read back to.
 */
export function streamDictionary(file: Buffer, keyword: number): string | undefined {
  let end = keyword - 1
  while (end >= 0 && WHITE.has(file[end]!)) end--
  if (end < 1 || file[end] !== 0x3e || file[end - 1] !== 0x3e) return undefined
  // Back to the `<<` that opens it, nested dictionaries (/DecodeParms) skipped.
  let depth = 0
  let at = end
  const floor = Math.max(1, keyword - 65536)
  while (at >= floor) {
    if (file[at] === 0x3e && file[at - 1] === 0x3e) {
      depth++
      at -= 2
    } else if (file[at] === 0x3c && file[at - 1] === 0x3c) {
      if (--depth === 0) break
      at -= 2
    } else at--
  }
  if (depth !== 0) return undefined
  return file.toString('latin1', at - 1, end + 1).replace(/#([0-9a-fA-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)))
}

/**
 * The filters a stream dictionary names (/F before /Filter, as pdf.js reads them), the ASCII ones
 * abbreviated; [] when there is none or they are given by reference (a Flate one is still found
 * by its header).
 */
export function filtersOf(dictionary: string | undefined): string[] {
  if (dictionary === undefined) return []
  const value = /\/F(?![\w.#-])\s*(\[[^\]]*\]|\/[^\s/[\]<>()%]+)/.exec(dictionary) ?? /\/Filter(?![\w.#-])\s*(\[[^\]]*\]|\/[^\s/[\]<>()%]+)/.exec(dictionary)
  if (!value) return []
  return [...value[1]!.matchAll(/\/([^\s/[\]<>()%]+)/g)].map(name => NAMES[name[1]!] ?? name[1]!)
}

/** A two-byte zlib header pdf.js's FlateStream accepts (it ignores the window size and the checksum). */
export function zlibHeader(data: Uint8Array): boolean {
  const cmf = data[0]
  const flg = data[1]
  return cmf !== undefined && flg !== undefined && (cmf & 0x0f) === 8 && ((cmf << 8) + flg) % 31 === 0 && (flg & 0x20) === 0
}

/**
 * How many bytes `data` decompresses to, counted up to just past `cap` (the data beyond the
 * compressed stream's end is ignored), and whether that output starts like compressed data
 * again. Raw inflate: pdf.js checks neither the window size nor the Adler-32 checksum.
 */
async function decompressedSize(data: Uint8Array, brotli: boolean, cap: number): Promise<{ size: number; stacked: boolean }> {
  const held = Math.min(cap, SYNC_BYTES)
  try {
    // The usual stream, at once; past `held` zlib stops and throws.
    const options = { maxOutputLength: Math.max(1, held), finishFlush: brotli ? constants.BROTLI_OPERATION_FLUSH : constants.Z_SYNC_FLUSH }
    const out = brotli ? brotliDecompressSync(data, options) : inflateRawSync(data, options)
    return { size: out.byteLength, stacked: zlibHeader(out) }
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE' && held === cap) return { size: cap + 1, stacked: false }
  }
  // A large stream, or corrupt data (pdf.js keeps what decoded before the fault): counted as a
  // stream, each chunk dropped once counted, so memory stays flat whatever the output.
  return new Promise(resolve => {
    const stream: InflateRaw | BrotliDecompress = brotli ? createBrotliDecompress() : createInflateRaw()
    let size = 0
    let head: Uint8Array | undefined
    const done = () => resolve({ size, stacked: head !== undefined && zlibHeader(head) })
    stream.on('data', (chunk: Buffer) => {
      head ??= chunk
      size += chunk.byteLength
      if (size > cap) stream.destroy()
    })
    stream.on('error', done)
    stream.on('close', done)
    stream.end(data)
  })
}

// Output held in memory at once by the quick path (zlib builds it whole before it is counted).
const SYNC_BYTES = 1024 * 1024

/** ASCIIHexDecode (ISO 32000 §7.4.2): hex digits up to `>`, white space skipped, an odd last digit followed by 0. */
function asciiHex(data: Uint8Array): Uint8Array {
  const end = Buffer.from(data.buffer, data.byteOffset, data.byteLength).indexOf(0x3e)
  const digits = Buffer.from(data.buffer, data.byteOffset, end < 0 ? data.byteLength : end).toString('latin1').replace(/[^0-9a-fA-F]/g, '')
  return Buffer.from(digits.length % 2 ? `${digits}0` : digits, 'hex')
}

/**
 * A dictionary's own entries as pdf.js's lexer sees them: nested dictionaries, strings, hex
 * strings and comments blanked; `flat` also without arrays' contents. A key written inside one
 * of those is not the dictionary's (regression QA: a /Subtype /Image or /Length in a nested
 * /DecodeParms or a string).
 */
export function ownEntries(dictionary: string): { flat: string; withArrays: string } {
  let flat = ''
  let withArrays = ''
  let depth = 0
  let arrays = 0
  for (let at = 0; at < dictionary.length; at++) {
    const char = dictionary[at]!
    if (char === '(') {
      for (let open = 1; open > 0 && ++at < dictionary.length; ) {
        if (dictionary[at] === '\\') at++
        else if (dictionary[at] === '(') open++
        else if (dictionary[at] === ')') open--
      }
      withArrays += ' '
    } else if (char === '%') {
      while (at < dictionary.length && dictionary[at] !== '\n' && dictionary[at] !== '\r') at++
    } else if (char === '<' && dictionary[at + 1] === '<') {
      depth++
      at++
    } else if (char === '>' && dictionary[at + 1] === '>') {
      depth--
      at++
    } else if (char === '<') {
      at = dictionary.indexOf('>', at)
      if (at < 0) break
    } else if (depth === 1) {
      if (char === '[' || char === ']') arrays += char === '[' ? 1 : -1
      else if (arrays === 0) flat += char
      withArrays += char
    }
  }
  return { flat, withArrays }
}

/**
 * An image by its own /Subtype, with its filters written as names: pdf.js resolves a filter given
 * by reference, which the prescan cannot see, so such a stream may hide a second layer
 * (regression QA) and is not spared the "compressed twice over" test.
 */
function isImage(own: { flat: string; withArrays: string }): boolean {
  if (!/\/Subtype\s*\/Image(?![\w.#-])/.test(own.flat)) return false
  const filter = /\/(?:F|Filter)(?![\w.#-])\s*(\[[^\]]*\]|[^/\s][^/]*)?/.exec(own.withArrays)
  return filter === null || !/\d+\s+[+-]?\d+\s*R/.test(filter[1] ?? '')
}

/**
 * Where a stream's data ends for pdf.js when no end character stops it: at its /Length when
 * `endstream` follows there, else at the first `endstream` (pdf.js's own fallback), so the later
 * of the two covers both; a /Length given by reference, or none, leaves the end of the file.
 * The dictionary's own last /Length counts, as pdf.js keeps the last of a repeated key.
 */
function streamEnd(file: Buffer, start: number, dictionary: string | undefined): number {
  const own = dictionary === undefined ? '' : ownEntries(dictionary).flat
  const last = [...own.matchAll(/\/Length(?![\w.#-])\s*([^/]*)/g)].at(-1)
  const direct = last === undefined ? null : /^\+?(\d{1,12})\s*$/.exec(last[1]!)
  if (direct === null) return file.length
  const keyword = file.indexOf('endstream', start, 'latin1')
  return Math.min(file.length, Math.max(start + Number(direct[1]), keyword < 0 ? file.length : keyword))
}

/**
 * ASCII85Decode as pdf.js reads it (Ascii85Stream.readBlock), byte for byte: only its four white
 * space bytes are skipped, every other byte is a digit (`byte - 33`, unchecked), `z` at a group's
 * start is four zeros, and `~` or the end stops it, a short group padded with `u`. The
 * specification's reading (skip anything outside `!`–`u`) let one out-of-range character put the
 * count out of step with what pdf.js inflates (regression QA).
 */
function ascii85(data: Uint8Array): Uint8Array {
  const out = Buffer.alloc(Math.ceil(data.byteLength * 4) + 8)
  const group = new Array<number>(5)
  let length = 0
  let at = 0
  const next = () => {
    while (at < data.byteLength && (data[at] === 0x20 || data[at] === 0x09 || data[at] === 0x0d || data[at] === 0x0a)) at++
    return at < data.byteLength ? data[at++]! : -1
  }
  for (;;) {
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
  return out.subarray(0, length)
}
