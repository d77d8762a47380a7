import { expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { extractDocument } from '../../src/documents/extract'
import type { ExtractionLimits } from '../../src/documents/types'
import { fixture } from './hostile'
import { pdfFile, stream } from './pdf-file'

// What a PDF page shows outside its text layer. filled-form.pdf (hand-built by a QA pass, 1.7 KB,
// readable as text) has one page: the text "Application form" and "Name:", a text field filled
// with "Jane Filled", a FreeText annotation "TYPED ON FORM" (text typed onto the page) and a sticky
// note "Sticky note comment".
const defaults = loadConfig({}).documents
const limits: ExtractionLimits = { maxTextBytes: defaults.maxTextBytes, zip: defaults.zip, pdf: defaults.pdf }

test("a filled form's values and text typed onto the page follow the page's text; sticky notes stay out", async () => {
  // Before: "Application form\nName:", the answers lost (pdf.js keeps annotations apart from the text layer).
  const result = await extractDocument(await fixture('filled-form.pdf'), limits)
  expect(result).toEqual({ documentType: 'pdf', text: 'Application form\nName:\nTYPED ON FORM\nJane Filled' })
})

/**
 * A one-page PDF showing "Body text", with `annotations` (PDF dictionaries, as written) on the
 * page and every one with a /T (a field) in the AcroForm.
 */
function formPdf(annotations: string[]): Uint8Array {
  const content = 'BT /F1 12 Tf 72 720 Td (Body text) Tj ET'
  const first = 5
  return pdfFile([
    `<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [${annotations.map((a, i) => (a.includes('/T (') ? `${first + i} 0 R ` : '')).join('')}] >> >>`,
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> /Contents ${first + annotations.length} 0 R /Annots [${annotations.map((_, i) => `${first + i} 0 R`).join(' ')}] >>`,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
    ...annotations,
    stream(content),
  ])
}

const widget = (fields: string) => `<< /Type /Annot /Subtype /Widget /Rect [72 600 300 620] ${fields} >>`

test('left out: password fields, hidden annotations, a value another widget of the field shows again; lines split at CR; options as shown', async () => {
  // QA: a password field's value reached the text (and the model); a hidden FreeText did too; a
  // choice gave its export value (FR), not what the form shows (France); Acrobat's CR line breaks stayed.
  const pdf = formPdf([
    widget('/FT /Tx /T (pw) /Ff 8192 /V (SECRET_PASSWORD)'),
    '<< /Type /Annot /Subtype /FreeText /Rect [100 190 300 210] /F 2 /Contents (HIDDEN_NOTE) >>',
    widget('/FT /Ch /T (country) /Ff 131072 /Opt [[(US) (United States)] [(FR) (France)]] /V (FR)'),
    widget('/FT /Tx /T (address) /Ff 4096 /V (Line A\\rLine B)'),
    widget('/FT /Tx /T (twice) /V (SHOWN_ONCE)'),
    widget('/FT /Tx /T (twice) /V (SHOWN_ONCE)'),
  ])
  const result = await extractDocument(pdf, limits)
  expect(result).toEqual({ documentType: 'pdf', text: 'Body text\nFrance\nLine A\nLine B\nSHOWN_ONCE' })
})
