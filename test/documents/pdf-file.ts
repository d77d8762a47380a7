import { deflateSync } from 'node:zlib'

/**
 * A PDF file written by hand: `objects` (PDF values, as written) numbered from 1, the first the
 * catalog, with a cross-reference table so pdf.js reads it without repairing it.
 */
export function pdfFile(objects: string[]): Uint8Array {
  let body = '%PDF-1.5\n'
  const offsets: number[] = []
  objects.forEach((object, index) => {
    offsets.push(body.length)
    body += `${index + 1} 0 obj\n${object}\nendobj\n`
  })
  const xref = body.length
  body += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map(offset => `${String(offset).padStart(10, '0')} 00000 n \n`).join('')}`
  body += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`
  return new TextEncoder().encode(body)
}

/** A stream object holding `content`. */
export const stream = (content: string, dictionary = '') => `<< ${dictionary} /Length ${content.length} >>\nstream\n${content}\nendstream`

/**
 * A PDF file as pdfFile writes it, but with the objects numbered in `compressed` (1-based) kept in
 * one Flate-compressed object stream, and a cross-reference stream to find them, as PDF 1.5
 * writers keep most objects. pdf.js reads a stream object from an object stream too.
 */
export function pdfFileWithObjectStream(objects: string[], compressed: number[]): Uint8Array {
  const offsets: number[] = []
  let body = ''
  for (const number of compressed) {
    offsets.push(body.length)
    body += `${objects[number - 1]}\n`
  }
  const pairs = `${compressed.map((number, index) => `${number} ${offsets[index]}`).join(' ')}\n`
  const first = pairs.length
  const packed = deflateSync(Buffer.from(pairs + body, 'latin1'))
  const parts: Buffer[] = [Buffer.from('%PDF-1.5\n', 'latin1')]
  let length = parts[0]!.length
  const at: number[] = []
  const push = (bytes: Buffer) => {
    parts.push(bytes)
    length += bytes.length
  }
  objects.forEach((object, index) => {
    if (compressed.includes(index + 1)) return
    at[index + 1] = length
    push(Buffer.from(`${index + 1} 0 obj\n${object}\nendobj\n`, 'latin1'))
  })
  const stm = objects.length + 1
  at[stm] = length
  push(Buffer.concat([Buffer.from(`${stm} 0 obj\n<< /Type /ObjStm /N ${compressed.length} /First ${first} /Filter /FlateDecode /Length ${packed.length} >>\nstream\n`, 'latin1'), packed, Buffer.from('\nendstream\nendobj\n', 'latin1')]))
  const xref = stm + 1
  at[xref] = length
  const row = (type: number, field: number, index: number) => Buffer.from([type, (field >>> 24) & 0xff, (field >>> 16) & 0xff, (field >>> 8) & 0xff, field & 0xff, (index >>> 8) & 0xff, index & 0xff])
  const rows = [row(0, 0, 65535)]
  for (let number = 1; number <= xref; number++) rows.push(compressed.includes(number) ? row(2, stm, compressed.indexOf(number)) : row(1, at[number]!, 0))
  const table = Buffer.concat(rows)
  push(Buffer.concat([Buffer.from(`${xref} 0 obj\n<< /Type /XRef /Size ${xref + 1} /W [1 4 2] /Root 1 0 R /Length ${table.length} >>\nstream\n`, 'latin1'), table, Buffer.from(`\nendstream\nendobj\nstartxref\n${at[xref]}\n%%EOF\n`, 'latin1')]))
  return new Uint8Array(Buffer.concat(parts))
}
