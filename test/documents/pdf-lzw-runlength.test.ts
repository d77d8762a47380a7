import { describe, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { extractDocument } from '../../src/documents/extract'
import { ExtractionError, type ExtractionLimits } from '../../src/documents/types'
import { pdfWithContents } from './hostile'

// LZW and RunLength streams were not measured before pdf.js decoded them: an LZW bomb (29 KB for
// 65 MiB) or a RunLength one (1 MB) was bounded only by the watchdog. They are counted now, as
// pdf.js's LZWStream and RunLengthStream decode them.
const defaults = loadConfig({}).documents
const limits: ExtractionLimits = { maxTextBytes: defaults.maxTextBytes, zip: defaults.zip, pdf: defaults.pdf }
const MiB = 1024 * 1024
const OVER_CAP = /a stream in the PDF decompresses to more than 64 MiB \(a decompression bomb/
const CONTENT = Buffer.from('BT /F1 12 Tf 72 712 Td (First line) Tj ET\nBT /F1 12 Tf 72 690 Td (Second line) Tj ET\n', 'latin1')

async function refused(bytes: Uint8Array, pattern: RegExp): Promise<void> {
  const error = await extractDocument(bytes, limits).then(() => undefined, error => error)
  expect(error).toBeInstanceOf(ExtractionError)
  expect((error as ExtractionError).reason).toBe('invalid')
  expect((error as ExtractionError).message).toMatch(pattern)
}

/** Codes packed high bit first at the widths pdf.js reads them: 9 bits, one more each time the next table entry plus EarlyChange reaches a power of two, to 12. */
function lzwCodes(earlyChange: number) {
  const bytes: number[] = []
  let bits = 0
  let count = 0
  let width = 9
  let next = 258
  let first = true
  return {
    put(code: number) {
      bits = (bits << width) | code
      for (count += width; count >= 8; count -= 8) bytes.push((bits >>> (count - 8)) & 0xff)
      bits &= (1 << count) - 1
      if (code === 256) [width, next, first] = [9, 258, true]
      else if (!first) {
        const sum = ++next + earlyChange
        if ((sum & (sum - 1)) === 0) width = Math.min(Math.log2(sum) + 1, 12)
      }
      if (code !== 256) first = false
    },
    end: () => Buffer.from(count > 0 ? [...bytes, (bits << (8 - count)) & 0xff] : bytes),
  }
}

/** LZW as an encoder writes it: a clear code before the table fills, 257 at the end. */
function lzwEncode(data: Buffer, earlyChange = 1): Buffer {
  const out = lzwCodes(earlyChange)
  let table = new Map<string, number>()
  let word = ''
  for (const byte of data) {
    const char = String.fromCharCode(byte)
    if (word === '' || table.has(word + char)) {
      word += char
      continue
    }
    out.put(word.length === 1 ? word.charCodeAt(0) : table.get(word)!)
    table.set(word + char, 258 + table.size)
    if (table.size === 3800) {
      out.put(256)
      table = new Map()
    }
    word = char
  }
  out.put(word.length === 1 ? word.charCodeAt(0) : table.get(word)!)
  out.put(257)
  return out.end()
}

/** `bytes` spaces in LZW: each code names the last one's string and one more space, to 3,839 at a code once the table is full. */
function lzwBomb(bytes: number, earlyChange = 1): Buffer {
  const out = lzwCodes(earlyChange)
  out.put(0x20)
  for (let written = 1, code = 258; written < bytes; code = Math.min(code + 1, 4095)) {
    out.put(code)
    written += code - 256
  }
  out.put(257)
  return out.end()
}

/** RunLength: literal runs of up to 128 bytes, then `repeat` spaces in runs of 128, then 128 (the end). */
function runLengthEncode(data: Buffer, repeat = 0): Buffer {
  const parts: Buffer[] = []
  for (let at = 0; at < data.length; at += 128) {
    const run = data.subarray(at, at + 128)
    parts.push(Buffer.from([run.length - 1]), run)
  }
  parts.push(Buffer.alloc(Math.ceil(repeat / 128) * 2, Buffer.from([129, 0x20])), Buffer.from([128]))
  return Buffer.concat(parts)
}

describe('LZW and RunLength streams are decoded and counted before pdf.js reads them', () => {
  test('an LZW bomb past the per-stream cap is refused, whatever EarlyChange, and when its filter is given by reference', async () => {
    const bomb = lzwBomb(65 * MiB)
    expect(bomb.byteLength).toBeLessThan(32_000)
    await refused(pdfWithContents([{ data: bomb, dictionary: '/Filter /LZWDecode' }]), OVER_CAP)
    await refused(pdfWithContents([{ data: lzwBomb(65 * MiB, 0), dictionary: '/Filter [/LZW] /DecodeParms [<< /EarlyChange 0 >>]' }]), OVER_CAP)
    await refused(pdfWithContents([{ data: bomb, dictionary: '/Filter 6 0 R' }], ['/LZWDecode']), OVER_CAP)
    await refused(pdfWithContents([{ data: Buffer.from(`${bomb.toString('hex')}>`), dictionary: '/Filter [/AHx /LZWDecode]' }]), OVER_CAP)
  })

  test('an EarlyChange that is no number, with which pdf.js reads 0-bit codes and writes zeros without end, is refused', async () => {
    const tiny = lzwEncode(CONTENT)
    await refused(pdfWithContents([{ data: tiny, dictionary: '/Filter /LZWDecode /DecodeParms << /EarlyChange /No >>' }]), OVER_CAP)
  })

  test('a RunLength bomb past the per-stream cap is refused', async () => {
    await refused(pdfWithContents([{ data: runLengthEncode(CONTENT, 65 * MiB), dictionary: '/Filter /RunLengthDecode' }]), OVER_CAP)
  })

  test('an LZW or RunLength output that opens like zlib data is not refused as compressed twice (they read any bytes)', async () => {
    const { measurePdfStreams } = await import('../../src/documents/pdf-streams')
    const codes = lzwCodes(1)
    for (const code of [0x78, 0x9c, 257]) codes.put(code)
    expect(await measurePdfStreams(pdfWithContents([{ data: codes.end(), dictionary: '/Filter /LZWDecode' }]))).toBeUndefined()
    expect(await measurePdfStreams(pdfWithContents([{ data: Buffer.from([1, 0x78, 0x9c, 128]), dictionary: '/Filter /RunLengthDecode' }]))).toBeUndefined()
  })

  test('legitimate LZW and RunLength content streams are read', async () => {
    for (const { data, dictionary } of [
      { data: lzwEncode(CONTENT), dictionary: '/Filter /LZWDecode' },
      { data: lzwEncode(CONTENT, 0), dictionary: '/Filter /LZWDecode /DecodeParms << /EarlyChange 0 >>' },
      { data: lzwEncode(Buffer.concat([CONTENT, Buffer.alloc(200_000, 0x20)])), dictionary: '/Filter /LZW' },
      { data: runLengthEncode(CONTENT, 1000), dictionary: '/Filter /RunLengthDecode' },
      { data: Buffer.from(`${runLengthEncode(CONTENT).toString('hex')}>`), dictionary: '/Filter [/ASCIIHexDecode /RL]' },
    ]) {
      expect({ dictionary, text: (await extractDocument(pdfWithContents([{ data, dictionary }]), limits)).text }).toEqual({ dictionary, text: 'First line\nSecond line' })
    }
  })
})
