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
