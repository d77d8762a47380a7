import { describe, expect, test } from 'bun:test'
import { deflateRawSync, inflateRawSync } from 'node:zlib'
import { loadConfig } from '../../src/config/load'
import { extractDocument } from '../../src/documents/extract'
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
