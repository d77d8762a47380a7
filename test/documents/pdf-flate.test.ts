import { describe, expect, test } from 'bun:test'
import { deflateRawSync, inflateRawSync } from 'node:zlib'
import { loadConfig } from '../../src/config/load'
import { extractDocument } from '../../src/documents/extract'
import { flate as decodeFlate } from '../../src/documents/pdf-flate'
import { MAX_PDF_TABLE_EXCESS, measurePdfStreams } from '../../src/documents/pdf-streams'
import { ExtractionError, type ExtractionLimits } from '../../src/documents/types'
import { pdfWithContents } from './hostile'

// Flate is counted as pdf.js's FlateStream reads it (src/documents/pdf-flate.ts), not as zlib
// does: where zlib stops at a fault pdf.js reads past, the prescan counted a few bytes and pdf.js
// inflated what followed (QA: 80 MiB after a copy from before the stream's start). Each opening
// below is refused by zlib and read past by pdf.js: the same opening before a page's text is read
// by pdf.js (the count must follow it), and before 65 MiB it is refused.
const defaults = loadConfig({}).documents
const limits: ExtractionLimits = { maxTextBytes: defaults.maxTextBytes, zip: defaults.zip, pdf: defaults.pdf }
const MiB = 1024 * 1024
const TEXT = 'BT /F1 24 Tf 72 700 Td (After the opening) Tj ET'

/** Deflate's bit order: values least significant bit first, Huffman codes most significant first. */
class Bits {
  private readonly out: number[] = []
  private byte = 0
  private count = 0
  put(value: number, count: number): this {
    for (let bit = 0; bit < count; bit++) {
      this.byte |= ((value >> bit) & 1) << this.count
      if (++this.count === 8) this.flush()
    }
    return this
  }
  code([code, length]: [number, number]): this {
    for (let bit = length - 1; bit >= 0; bit--) this.put((code >> bit) & 1, 1)
    return this
  }
  /** The bits so far, then an empty stored block (zlib's sync marker), so whole deflate blocks may follow. */
  aligned(): Buffer {
    this.put(0, 3)
    if (this.count > 0) this.flush()
    return Buffer.from([...this.out, 0x00, 0x00, 0xff, 0xff])
  }
  bytes(): Buffer {
    if (this.count > 0) this.flush()
    return Buffer.from(this.out)
  }
  private flush() {
    this.out.push(this.byte)
    this.byte = 0
    this.count = 0
  }
}

/** Canonical Huffman codes for `lengths`, as deflate assigns them (by length, then symbol). */
function canonical(lengths: number[]): Array<[number, number]> {
  const codes: Array<[number, number]> = []
  let code = 0
  for (let length = 1; length <= 15; length++, code <<= 1) {
    lengths.forEach((each, symbol) => {
      if (each === length) codes[symbol] = [code++, length]
    })
  }
  return codes
}

const FIXED_LITERALS = canonical(Array.from({ length: 288 }, (_, symbol) => (symbol < 144 ? 8 : symbol < 256 ? 9 : symbol < 280 ? 7 : 8)))
const FIXED_DISTANCES = canonical(Array.from({ length: 30 }, () => 5))

/** A dynamic block's header (not final) for these code lengths, each written as it is (no repeat codes); its codes. */
function dynamicBlock(bits: Bits, literals: number[], distances: number[], final = false) {
  // The code length code: symbols 0-12 of four bits, 13-18 of five (a complete code).
  const lengthCode = canonical(Array.from({ length: 19 }, (_, symbol) => (symbol < 13 ? 4 : 5)))
  bits.put(final ? 1 : 0, 1).put(2, 2).put(literals.length - 257, 5).put(distances.length - 1, 5).put(15, 4)
  for (const symbol of [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]) bits.put(symbol < 13 ? 4 : 5, 3)
  for (const length of [...literals, ...distances]) bits.code(lengthCode[length]!)
  return { literals: canonical(literals), distances: canonical(distances) }
}

/** A Flate stream (zlib header, no checksum: pdf.js reads none) of `opening` then `payload` deflated. */
const flate = (opening: Buffer, payload: Buffer) => Buffer.concat([Buffer.from([0x78, 0x9c]), opening, deflateRawSync(payload)])

const OPENINGS: Array<[string, () => Buffer]> = [
  // A fixed block copying 3 bytes from 1 back, at the start: zlib "invalid distance too far back".
  ['a copy from before the stream’s start', () => new Bits().put(0, 1).put(1, 2).code(FIXED_LITERALS[257]!).code(FIXED_DISTANCES[0]!).code(FIXED_LITERALS[256]!).aligned()],
  // Length code 286 (258 bytes to pdf.js): zlib "invalid literal/length code".
  ['length code 286', () => new Bits().put(0, 1).put(1, 2).code(FIXED_LITERALS[286]!).code(FIXED_DISTANCES[0]!).code(FIXED_LITERALS[256]!).aligned()],
  // A stored block of LEN 0 and NLEN 0: zlib "invalid stored block lengths".
  ['a stored block of LEN 0 and NLEN 0', () => Buffer.from([0x00, 0x00, 0x00, 0x00, 0x00])],
  // 32 distance codes, code 30 used (a copy from distance 0 to pdf.js): zlib "too many length or distance symbols".
  [
    'a dynamic block of 32 distance codes',
    () => {
      const bits = new Bits()
      const codes = dynamicBlock(bits, Array.from({ length: 288 }, (_, symbol) => (symbol < 144 ? 8 : symbol < 256 ? 9 : symbol < 280 ? 7 : 8)), Array.from({ length: 32 }, () => 5))
      return bits.code(codes.literals[257]!).code(codes.distances[30]!).code(codes.literals[256]!).aligned()
    },
  ],
]

async function refused(bytes: Uint8Array): Promise<void> {
  const error = await extractDocument(bytes, limits).then(() => undefined, error => error)
  expect(error).toBeInstanceOf(ExtractionError)
  expect((error as ExtractionError).message).toMatch(/a stream in the PDF decompresses to more than 64 MiB \(a decompression bomb/)
}

describe('Flate streams are counted as pdf.js reads them, past what zlib refuses', () => {
  const bomb = Buffer.alloc(65 * MiB)
  for (const [name, opening] of OPENINGS) {
    test(`${name}: read by pdf.js before text, refused before 65 MiB`, async () => {
      expect(() => inflateRawSync(flate(opening(), Buffer.from(TEXT)).subarray(2))).toThrow()
      const small = pdfWithContents([{ data: flate(opening(), Buffer.from(TEXT)), dictionary: '/Filter /FlateDecode' }])
      expect((await extractDocument(small, limits)).text).toBe('After the opening')
      await refused(pdfWithContents([{ data: flate(opening(), bomb), dictionary: '/Filter /FlateDecode' }]))
    })
  }

  test('valid data pdf.js’s decoder reads otherwise than zlib is counted as zlib reads it too', async () => {
    // A dynamic block whose end code is 1 bit long among codes of up to 15: pdf.js's decoder has
    // read two bytes ahead when it reaches the stored block after it, and takes its LEN from
    // there; zlib (pdf.js's native path, with the checksum right) reads the stored block, then 65 MiB.
    const bits = new Bits()
    const literals = Array.from({ length: 257 }, (_, symbol) => (symbol === 256 ? 1 : symbol < 14 ? symbol + 2 : symbol === 14 ? 15 : 0))
    const codes = dynamicBlock(bits, literals, [1])
    const stored = Buffer.from([0x04, 0x00, 0xfb, 0xff, 0x01, 0x02, 0x03, 0x04])
    const head = bits.code(codes.literals[256]!).put(0, 3).bytes()
    const checksum = Buffer.alloc(4)
    checksum.writeUInt32BE(Bun.hash.adler32(Buffer.concat([stored.subarray(4), bomb])))
    const data = Buffer.concat([Buffer.from([0x78, 0x9c]), head, stored, deflateRawSync(bomb), checksum])
    expect(inflateRawSync(data.subarray(2), { maxOutputLength: 70 * MiB }).byteLength).toBe(65 * MiB + 4)
    await refused(pdfWithContents([{ data, dictionary: '/Filter /FlateDecode' }]))
  })
})

// What reading Flate data costs, beyond what it decodes to (review: 40 s of prescan for a 1.25 MB
// file, 8 ms before pdf.js's decoder was ported): the bytes read are charged to the document's
// meter, and the Huffman tables built past their bytes' share to a slack of their own.
describe('Flate data is charged for its reading and its tables, not only its output', () => {
  const ZLIB = Buffer.from([0x78, 0x01])
  /** `count` empty stored blocks, not final: five bytes each that decode to nothing. */
  const emptyBlocks = (count: number) => Buffer.alloc(count * 5).map((_, at) => [0x00, 0x00, 0x00, 0xff, 0xff][at % 5]!)
  /**
   * `count` dynamic blocks of 12 bytes each that decode to nothing: a literal code of 1 bit (the
   * end code) and one of 15 (an incomplete set zlib refuses, pdf.js reads), so pdf.js builds a
   * table of 32,768 entries for each.
   */
  function tableBlocks(count: number): Buffer {
    const bits = new Bits()
    const lengthCodes: Record<number, [number, number]> = { 1: [0b00, 2], 15: [0b01, 2], 18: [0b10, 2] }
    for (let block = 0; block < count; block++) {
      bits.put(block === count - 1 ? 1 : 0, 1).put(2, 2).put(0, 5).put(0, 5).put(15, 4)
      for (const symbol of [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]) bits.put(lengthCodes[symbol]?.[1] ?? 0, 3)
      // Literal 0: 15 bits; 1-255: none (138 + 117 zeros); the end code and the one distance code: 1 bit.
      bits.code(lengthCodes[15]!).code(lengthCodes[18]!).put(127, 7).code(lengthCodes[18]!).put(106, 7).code(lengthCodes[1]!).code(lengthCodes[1]!)
      bits.code([0, 1])
    }
    return bits.bytes()
  }
  /**
   * A file of `keywords` Flate streams, each inside the one before's data (a stored block of 100
   * bytes holding the next object's header and keyword, and a zlib header), so each one's data runs
   * through all after it to `tail`, read again for each (the review's layout, with dictionaries).
   */
  function overlapping(keywords: number, tail: Buffer): Uint8Array {
    const object = (number: number) => `${number} 0 obj\n<< /Filter /FlateDecode >>\nstream\n`
    const parts = [Buffer.from(`%PDF-1.4\n${object(1)}`), ZLIB]
    for (let keyword = 2; keyword <= keywords; keyword++) {
      const data = Buffer.alloc(100, 0x20)
      Buffer.concat([Buffer.from(object(keyword)), ZLIB]).copy(data, 100 - object(keyword).length - 2)
      parts.push(Buffer.from([0x00, 100, 0, ~100 & 0xff, 0xff]), data)
    }
    return new Uint8Array(Buffer.concat([...parts, tail, Buffer.from('\nendstream\nendobj\n%%EOF\n')]))
  }
  const within = (maxInflatedBytes: number) => ({ maxStreamBytes: 64 * MiB, maxInflatedBytes, maxTableExcess: MAX_PDF_TABLE_EXCESS })

  test('data that decodes to nothing costs its reading, once for each keyword that reads it', async () => {
    const tail = Buffer.concat([emptyBlocks(13_107), Buffer.from([0x01, 0x00, 0x00, 0xff, 0xff])])
    // Two keywords read 128 KiB, 64 read 4 MiB: past a meter of 2 MiB (before: nothing was charged).
    expect(await measurePdfStreams(overlapping(2, tail), within(2 * MiB))).toBeUndefined()
    expect(await measurePdfStreams(overlapping(64, tail), within(2 * MiB))).toMatch(/more than 2 MiB in all/)
    expect(decodeFlate(tail, MiB, 2, 0)).toMatchObject({ size: 0, read: tail.length, complete: true })
  })

  test('tables built far past what their data reads and writes are refused (before: read through, nothing measured)', async () => {
    // 16 keywords over 4,000 blocks of 12 bytes: 2 billion table entries to pdf.js.
    const tail = tableBlocks(4000)
    expect(await measurePdfStreams(overlapping(16, tail))).toMatch(/builds far more Huffman tables than its size accounts for/)
    expect(decodeFlate(tail, MiB, 2, Number.POSITIVE_INFINITY)).toMatchObject({ size: 0, complete: true })
    expect(decodeFlate(tail, MiB, 2, MAX_PDF_TABLE_EXCESS)).toMatchObject({ size: 0, complete: false })
  })

  test('legitimate deflate builds its tables within its share: zlib’s smallest blocks (memLevel 1), every level', () => {
    const text = Buffer.from(Array.from({ length: 20000 }, (_, at) => `${(at * 7919) % 1000} `).join(''))
    for (const level of [1, 6, 9]) {
      const read = decodeFlate(deflateRawSync(text, { level, memLevel: 1 }), 64 * MiB, 2, 1 << 16)
      expect(read).toMatchObject({ size: text.length, complete: true, tables: 0 })
    }
  })
})
