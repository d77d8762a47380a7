import { describe, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { extractDocument } from '../../src/documents/extract'
import { ExtractionError, type ExtractionLimits } from '../../src/documents/types'
import { ascii85Encode, compressedSpaces, pdfWithContents, pdfWithObjectStream } from './hostile'

// PDF stream bombs: what a stream decompresses to is counted before pdf.js builds anything.
const defaults = loadConfig({}).documents
const limits: ExtractionLimits = { maxTextBytes: defaults.maxTextBytes, zip: defaults.zip, pdf: defaults.pdf }
const MiB = 1024 * 1024
const LINES: [string, string] = ['BT /F1 12 Tf 72 712 Td (First line) Tj ET\n', '\nBT /F1 12 Tf 72 690 Td (Second line) Tj ET\n']
const flate = (data: Buffer, dictionary = '/Filter /FlateDecode') => ({ data, dictionary })

async function refused(bytes: Uint8Array, pattern: RegExp): Promise<void> {
  const error = await extractDocument(bytes, limits).then(() => undefined, error => error)
  expect(error).toBeInstanceOf(ExtractionError)
  expect((error as ExtractionError).reason).toBe('invalid')
  expect((error as ExtractionError).message).toMatch(pattern)
}

describe('PDF streams are decompressed under a cap before pdf.js reads them', () => {
  test('a content stream of spaces past the per-stream cap is refused (QA: 1 MB inflating to 1 GB took pdf.js past 2 GB)', async () => {
    const bomb = pdfWithContents([flate(await compressedSpaces(80 * MiB, LINES))])
    expect(bomb.byteLength).toBeLessThan(200_000)
    await refused(bomb, /a stream in the PDF decompresses to more than 64 MiB \(a decompression bomb/)
    // The same document under the cap is read.
    const fine = pdfWithContents([flate(await compressedSpaces(MiB, LINES))])
    expect((await extractDocument(fine, limits)).text).toBe('First line\nSecond line')
  })

  test('streams each under the cap are refused past the running total for the document', async () => {
    const part = await compressedSpaces(60 * MiB)
    const contents = [flate(await compressedSpaces(0, LINES)), ...Array.from({ length: 5 }, () => flate(part))]
    await refused(pdfWithContents(contents), /the PDF's streams decompress to more than 256 MiB in all/)
  })

  test('an `endstream` inside the compressed data, or a filter name written with #-escapes, hides nothing', async () => {
    // A zlib header, a stored block holding "endstream", then the bomb's raw deflate blocks: pdf.js
    // takes the stream's extent from /Length, past the early keyword.
    const bomb = await compressedSpaces(80 * MiB, LINES)
    const hidden = Buffer.from('\nendstream\nendobj\n', 'latin1')
    const stored = Buffer.from([0x00, hidden.length, 0x00, ~hidden.length & 0xff, 0xff])
    const data = Buffer.concat([bomb.subarray(0, 2), stored, hidden, bomb.subarray(2)])
    await refused(pdfWithContents([flate(data)]), /decompresses to more than 64 MiB/)
    await refused(pdfWithContents([flate(bomb, '/Filter /Fl#61teDecode')]), /decompresses to more than 64 MiB/)
  })

  test('Brotli, and Flate behind an ASCII filter, are measured too', async () => {
    const brotli = await compressedSpaces(80 * MiB, LINES, true)
    expect(brotli.byteLength).toBeLessThan(1000)
    await refused(pdfWithContents([flate(brotli, '/Filter /BrotliDecode')]), /decompresses to more than 64 MiB/)
    const bomb = await compressedSpaces(80 * MiB, LINES)
    await refused(pdfWithContents([flate(Buffer.from(`${bomb.toString('hex')}>`), '/Filter [/ASCIIHexDecode /FlateDecode]')]), /decompresses to more than 64 MiB/)
  })

  test('a stream compressed twice over is refused, whether its filters say so or not', async () => {
    const { deflateSync } = await import('node:zlib')
    const twice = deflateSync(await compressedSpaces(MiB, LINES))
    await refused(pdfWithContents([flate(twice, '/Filter [/FlateDecode /FlateDecode]')]), /compresses a stream twice over/)
    await refused(pdfWithContents([flate(twice, '/Filter 99 0 R')]), /compresses a stream twice over/)
  })

  test('a stream with a wrong checksum is read whole, as pdf.js, which never checks it, reads it', async () => {
    const whole = await compressedSpaces(1000, LINES)
    const wrongChecksum = Buffer.concat([whole.subarray(0, whole.length - 4), Buffer.from([0, 0, 0, 0])])
    expect((await extractDocument(pdfWithContents([flate(wrongChecksum)]), limits)).text).toBe('First line\nSecond line')
  })
})

// Regression QA: raw pixels of #18191A open like a zlib header, so a lossless screenshot was refused
// as "compressed twice over". An image stream's output is counted but not read as compressed
// again; a /Subtype /Image nested in another dictionary or a string is not the stream's own, and
// an image marked stream is still held to the size caps.
describe('image streams', () => {
  const streamObject = (dictionary: string, data: Buffer) =>
    Buffer.concat([Buffer.from(`%PDF-1.7\n1 0 obj\n<< ${dictionary} /Length ${data.byteLength} >>\nstream\n`, 'latin1'), data, Buffer.from('\nendstream\nendobj\n%%EOF\n', 'latin1')])
  const IMAGE = '/Type /XObject /Subtype /Image /Width 800 /Height 500 /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /FlateDecode'

  test('pixels that open like a zlib header pass in an image; not in a content stream, nor behind a nested or quoted /Subtype /Image', async () => {
    const { deflateSync } = await import('node:zlib')
    const { measurePdfStreams } = await import('../../src/documents/pdf-streams')
    const darkPixels = deflateSync(Buffer.alloc(3 * 800 * 500, Buffer.from([0x18, 0x19, 0x1a])))
    expect(await measurePdfStreams(streamObject(IMAGE, darkPixels))).toBeUndefined()
    for (const dictionary of ['/Filter /FlateDecode', '/Filter /FlateDecode /DecodeParms << /Subtype /Image >>', '/Filter /FlateDecode /Note (/Subtype /Image)']) {
      expect(await measurePdfStreams(streamObject(dictionary, darkPixels))).toMatch(/twice over/)
    }
    expect(await measurePdfStreams(streamObject(IMAGE, await compressedSpaces(80 * MiB)))).toMatch(/more than 64 MiB/)
  })
})

// Regression QA: the prescan read ASCII85 by the specification (skipping bytes outside !-u) where
// pdf.js takes every byte but its four white-space ones as a digit, so one out-of-range character
// put the count out of step with what pdf.js inflated; and without an end marker each such stream
// was decoded to the end of the file.
test('ASCII85 is read as pdf.js reads it, and a stream without ~ ends at its /Length', async () => {
  const { measurePdfStreams } = await import('../../src/documents/pdf-streams')
  const bomb = await compressedSpaces(80 * MiB)
  const encoded = ascii85Encode(bomb)
  // Lower one digit and raise the next by 85: the same value to pdf.js, a character past `u`.
  const digits = [...encoded]
  digits[8] = String.fromCharCode(digits[8]!.charCodeAt(0) - 1)
  digits[9] = String.fromCharCode(digits[9]!.charCodeAt(0) + 85)
  const tweaked = Buffer.from(digits.join(''), 'latin1')
  const object = (data: Buffer) => Buffer.concat([Buffer.from(`%PDF-1.7\n1 0 obj\n<< /Filter [/ASCII85Decode /FlateDecode] /Length ${data.byteLength} >>\nstream\n`, 'latin1'), data, Buffer.from('\nendstream\nendobj\n', 'latin1')])
  expect(await measurePdfStreams(object(tweaked))).toMatch(/more than 64 MiB/)
  const many = Buffer.concat([...Array.from({ length: 5000 }, () => object(Buffer.from('!!!!!', 'latin1'))), Buffer.from('%%EOF\n')])
  expect(await measurePdfStreams(many)).toBeUndefined()
})

// Regression QA on the two fixes above: with no `~` the ASCII85 data was cut at the first /Length
// the dictionary text held (a wrong one, a repeated key's first, one in a nested dictionary or a
// string, or `6 0R` read as direct), where pdf.js reads to its own end; and an image whose second
// Flate layer was named through a reference was spared the "compressed twice over" test.
describe('no extent or filter pdf.js reads otherwise hides a bomb', () => {
  const A85_FLATE = '/Filter [/ASCII85Decode /FlateDecode]'
  const streamObject = (dictionary: string, data: Buffer) =>
    Buffer.concat([Buffer.from(`%PDF-1.7\n5 0 obj\n<< ${dictionary} >>\nstream\n`, 'latin1'), data, Buffer.from('\nendstream\nendobj\n%%EOF\n', 'latin1')])

  test('an ASCII85 layer without ~ is read to where pdf.js reads it, whatever /Length says', async () => {
    const { measurePdfStreams } = await import('../../src/documents/pdf-streams')
    const encoded = Buffer.from(ascii85Encode(await compressedSpaces(80 * MiB)).slice(0, -2).replace(/(.{72})/g, '$1\n'), 'latin1')
    for (const dictionary of [
      `${A85_FLATE} /Length 10`,
      `/Length 10 ${A85_FLATE} /Length ${encoded.byteLength}`,
      `${A85_FLATE} /DecodeParms [null << /Length 3 >>] /Length ${encoded.byteLength}`,
      `/Info (/Length 3) ${A85_FLATE} /Length ${encoded.byteLength}`,
      `${A85_FLATE} /Length 6 0R`,
    ]) {
      expect({ dictionary, found: await measurePdfStreams(streamObject(dictionary, encoded)) }).toEqual({ dictionary, found: expect.stringMatching(/more than 64 MiB/) })
    }
  })

  test('an image with a filter given by reference is not spared the "compressed twice over" test', async () => {
    const { deflateSync } = await import('node:zlib')
    const { measurePdfStreams } = await import('../../src/documents/pdf-streams')
    const twice = deflateSync(await compressedSpaces(8 * MiB))
    expect(await measurePdfStreams(streamObject(`/Subtype /Image /Filter [/FlateDecode 6 0 R] /Length ${twice.byteLength}`, twice))).toMatch(/twice over/)
    expect(await measurePdfStreams(streamObject(`/Subtype /Image /Filter 6 0 R /Length ${twice.byteLength}`, twice))).toMatch(/twice over/)
  })
})

// Regression QA: pdf.js reads a stream object stored in an object stream (the specification
// forbids it), whose data is then in the object stream's decoded data, never in the file: a bomb
// compressed into one was invisible to the count (300 MB of spaces inflated, RSS past 1.2 GB).
describe('object streams', () => {
  const PAGE: Array<[number, string]> = [
    [1, '<< /Type /Catalog /Pages 2 0 R >>'],
    [2, '<< /Type /Pages /Kids [3 0 R] /Count 1 >>'],
    [3, '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R /Resources << /Font << /F1 4 0 R >> >> >>'],
  ]
  const FONT: [number, string] = [4, '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>']
  const content = (data: Buffer): [number, string] => [5, `<< /Filter /FlateDecode /Length ${data.length} >>\nstream\n${data.toString('latin1')}\nendstream`]

  test('a stream object stored in an object stream is measured in its decoded data', async () => {
    await refused(pdfWithObjectStream([...PAGE, FONT], [content(await compressedSpaces(80 * MiB, LINES))]), /decompresses to more than 64 MiB/)
  })

  test('a document whose objects are stored in object streams is read', async () => {
    const pdf = pdfWithObjectStream([...PAGE, content(await compressedSpaces(1000, LINES))], [FONT, [6, '<< /Title (a stream of words) >>']])
    expect((await extractDocument(pdf, limits)).text).toBe('First line\nSecond line')
    const stored = pdfWithObjectStream([...PAGE, FONT], [content(await compressedSpaces(1000, LINES))])
    expect((await extractDocument(stored, limits)).text).toBe('First line\nSecond line')
  })

  // QA: pdf.js reads an object stream's objects at the offsets its pairs give, anywhere in its
  // data, which for a stream with no filter is the file itself: the page's content (object 5),
  // stored in one, starts inside a decoy object's string, where pdf.js reads [/AHx /Fl] and the
  // decoy's own header reads no filter.
  function offsetIntoString(content: Buffer, firstByReference = false): Uint8Array {
    const hex = `${content.toString('hex')}>`
    const decoy = `9 0 obj << /A (<< /Filter [/AHx /Fl] /B \\() >>\nstream\n${hex}\nendstream\nendobj\n`
    const pairs = `5 ${decoy.indexOf('<< /Filter')}\n`
    const data = pairs + decoy
    const parts: Buffer[] = []
    const at: number[] = []
    let length = 0
    const write = (number: number, object: string) => {
      at[number] = length
      const bytes = Buffer.from(`${number} 0 obj\n${object}\nendobj\n`, 'latin1')
      parts.push(bytes)
      length += bytes.length
    }
    parts.push(Buffer.from('%PDF-1.5\n'))
    length = parts[0]!.length
    for (const [number, object] of [...PAGE, FONT]) write(number, object)
    write(6, `<< /Type /ObjStm /N 1 /First ${firstByReference ? '8 0 R' : pairs.length} /Length ${data.length} >>\nstream\n${data}\nendstream`)
    write(8, String(pairs.length))
    const row = (type: number, field: number, index: number) => Buffer.from([type, field >>> 24, (field >>> 16) & 0xff, (field >>> 8) & 0xff, field & 0xff, index >>> 8, index & 0xff])
    const rows = [row(0, 0, 65535), ...[1, 2, 3, 4].map(number => row(1, at[number]!, 0)), row(2, 6, 0), row(1, at[6]!, 0), row(1, length, 0), row(1, at[8]!, 0)]
    const table = Buffer.concat(rows)
    parts.push(Buffer.from(`7 0 obj\n<< /Type /XRef /Size 9 /W [1 4 2] /Root 1 0 R /Length ${table.length} >>\nstream\n`, 'latin1'), table, Buffer.from(`\nendstream\nendobj\nstartxref\n${length}\n%%EOF\n`, 'latin1'))
    return new Uint8Array(Buffer.concat(parts))
  }

  test('an uncompressed object stream\'s objects are read at their offsets: one inside another object\'s string is measured', async () => {
    const small = offsetIntoString(await compressedSpaces(1000, LINES))
    expect((await extractDocument(small, limits)).text).toBe('First line\nSecond line')
    await refused(offsetIntoString(await compressedSpaces(65 * MiB, LINES)), /decompresses to more than 64 MiB/)
  })

  test('an uncompressed object stream whose /First is a reference may start an object anywhere: every stream is measured as any chain', async () => {
    const small = offsetIntoString(await compressedSpaces(1000, LINES), true)
    expect((await extractDocument(small, limits)).text).toBe('First line\nSecond line')
    await refused(offsetIntoString(await compressedSpaces(65 * MiB, LINES), true), /decompresses to more than 64 MiB/)
  })
})
