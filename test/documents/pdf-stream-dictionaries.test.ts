import { beforeAll, describe, expect, test } from 'bun:test'
import { deflateSync } from 'node:zlib'
import { loadConfig } from '../../src/config/load'
import { extractDocument } from '../../src/documents/extract'
import { measurePdfStreams } from '../../src/documents/pdf-streams'
import { ExtractionError, type ExtractionLimits } from '../../src/documents/types'
import { ascii85Encode, compressedSpaces, pdfWithContents } from './hostile'

// Regression QA on the text reading of stream dictionaries: pdf.js tokenizes a dictionary, and a
// dictionary written to be read otherwise as text hid a bomb from the prescan, bounded then only by
// the watchdog. Each PDF here is one pdf.js decodes to more than the 64 MiB cap (or, for the image
// exemption, one the prescan must not spare); each was let through by the text reading.
const defaults = loadConfig({}).documents
const limits: ExtractionLimits = { maxTextBytes: defaults.maxTextBytes, zip: defaults.zip, pdf: defaults.pdf }
const MiB = 1024 * 1024
const OVER_CAP = /a stream in the PDF decompresses to more than 64 MiB \(a decompression bomb/
const AHX_FLATE = '/Filter [/ASCIIHexDecode /FlateDecode]'
const A85_FLATE = '/Filter [/ASCII85Decode /FlateDecode]'

async function refused(bytes: Uint8Array, pattern: RegExp): Promise<void> {
  const error = await extractDocument(bytes, limits).then(() => undefined, error => error)
  expect(error).toBeInstanceOf(ExtractionError)
  expect((error as ExtractionError).reason).toBe('invalid')
  expect((error as ExtractionError).message).toMatch(pattern)
}

let bomb: Buffer // 65 MiB of spaces, deflated: ~65 KB
let hex: Buffer // the bomb behind an ASCIIHex layer: nothing opens like zlib data to a text reading
beforeAll(async () => {
  bomb = await compressedSpaces(65 * MiB, ['BT /F1 12 Tf 72 712 Td (Bomb) Tj ET\n', ''])
  hex = Buffer.from(`${bomb.toString('hex')}>`, 'latin1')
})
const hexBomb = (dictionary: string, extra: string[] = []) => pdfWithContents([{ data: hex, dictionary }], extra)

describe('a stream dictionary is read as pdf.js tokenizes it', () => {
  test('a filter given by reference leaves the chain unknown, and the stream is measured as any chain', async () => {
    await refused(hexBomb('/Filter 6 0 R', [`[/ASCIIHexDecode /FlateDecode]`]), OVER_CAP)
  })

  test('a `stream` keyword no dictionary reaches is measured as any chain; an output opening like zlib by chance is inflated, not refused', async () => {
    const stray = (data: Buffer) => Buffer.concat([Buffer.from('%PDF-1.7\n% a word: stream\n', 'latin1'), data, Buffer.from('\n%%EOF\n', 'latin1')])
    await expect(measurePdfStreams(stray(hex))).resolves.toMatch(OVER_CAP)
    // RunLength reads these four bytes as "x\x9c", a zlib header, then its end: nothing to inflate.
    await expect(measurePdfStreams(stray(Buffer.from([0x01, 0x78, 0x9c, 0x80])))).resolves.toBeUndefined()
  })

  test('a repeated /Filter counts by its last value, as pdf.js keeps it', async () => {
    await refused(hexBomb(`/Filter /FlateDecode ${AHX_FLATE}`), OVER_CAP)
  })

  test('a /Filter inside a nested dictionary is not the stream\'s', async () => {
    await refused(hexBomb(`/Foo << /Filter /FlateDecode >> ${AHX_FLATE}`), OVER_CAP)
  })

  test('a /Filter inside a string is not the stream\'s', async () => {
    await refused(hexBomb(`/Foo (/Filter /FlateDecode) ${AHX_FLATE}`), OVER_CAP)
  })

  test('an object header written inside a string is read from too: each dictionary pdf.js may give the stream is measured', async () => {
    // From `5 0 obj` (where the cross-reference table points) the filters are ASCIIHex and Flate; from
    // the `6 0 obj` inside its string, whose `)` a comment hides, Flate alone.
    await refused(hexBomb(`${AHX_FLATE} /S (6 0 obj << /Filter /FlateDecode % ) /X 1\n`), OVER_CAP)
    // pdf.js reads `5 0-obj` as a header (a minus inside a number is skipped): it is read from too.
    const header = Buffer.from(hexBomb(`${AHX_FLATE} /S (6 0 obj << /Filter /FlateDecode % ) /X 1\n`)).toString('latin1').replace('5 0 obj', '5 0-obj')
    await refused(new Uint8Array(Buffer.from(header, 'latin1')), OVER_CAP)
  })

  test('#-escapes are decoded inside one name: /Note#20#2FFilter is one key, /Fl#61teDecode is FlateDecode', async () => {
    await refused(hexBomb('/Note#20#2FFilter /FlateDecode /Filter [/ASCIIHexDecode /Fl#61teDecode]'), OVER_CAP)
  })
})

/**
 * The bomb as ASCII85 without `~` whose text holds `endstream` early (a stored deflate block whose
 * bytes encode as `endstream!`): where the dictionary's /Length is misread as short, the data is
 * cut there, while pdf.js reads it to its /Length, where the real `endstream` follows.
 */
function ascii85WithEarlyEndstream(): Buffer {
  const digits = (text: string) => [...text].reduce((value, char) => value * 85 + char.charCodeAt(0) - 33, 0)
  const early = Buffer.alloc(8)
  early.writeUInt32BE(digits('endst'), 0)
  early.writeUInt32BE(digits('ream!'), 4)
  const payload = Buffer.concat([Buffer.from([0]), early]) // one byte to align `early` on a group of four
  const stored = Buffer.from([0x00, payload.length, 0x00, ~payload.length & 0xff, 0xff])
  const text = ascii85Encode(Buffer.concat([bomb.subarray(0, 2), stored, payload, bomb.subarray(2)])).slice(0, -2)
  expect(text.slice(10, 20)).toBe('endstream!')
  return Buffer.from(`${text.slice(0, 10)}\n${text.slice(10).replace(/(.{72})/g, '$1\n')}`, 'latin1')
}

describe('the ASCII85 extent follows the stream\'s own last /Length', () => {
  test('a /Length written as another key\'s value (a key without a value before it) is not the stream\'s', async () => {
    const data = ascii85WithEarlyEndstream()
    await refused(pdfWithContents([{ data, dictionary: `${A85_FLATE} /Length ${data.length} /Junk /Length 10`, asWritten: true }]), OVER_CAP)
  })

  test('a /Length inside a string or a nested dictionary is not the stream\'s, whatever #-escapes it holds', async () => {
    const data = ascii85WithEarlyEndstream()
    for (const misleading of ['/Note (#29 /Length 10 #28)', '/D << /X#3E#3E /Length 10 >>']) {
      const pdf = pdfWithContents([{ data, dictionary: `${A85_FLATE} /Length ${data.length} ${misleading}`, asWritten: true }])
      await refused(pdf, OVER_CAP)
    }
  })
})

test('the image exemption needs the stream\'s own /Subtype /Image, not one in a string or a nested dictionary', async () => {
  // Compressed twice under one Flate filter: its output opens like zlib data, spared only in an image.
  const twice = deflateSync(await compressedSpaces(MiB, ['BT /F1 12 Tf 72 712 Td (Twice) Tj ET\n', '']))
  for (const misleading of ['/Note (#29 /Subtype /Image #28)', '/D << /X#3E#3E /Subtype /Image 1 >>']) {
    await refused(pdfWithContents([{ data: twice, dictionary: `/Filter /FlateDecode ${misleading}` }]), /compresses a stream twice over/)
  }
  const image = pdfWithContents([{ data: twice, dictionary: '/Type /XObject /Subtype /Image /Filter /FlateDecode' }])
  expect(await measurePdfStreams(image)).toBeUndefined()
})
