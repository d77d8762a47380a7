import { expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { extractDocument } from '../../src/documents/extract'
import type { ExtractionLimits } from '../../src/documents/types'
import { fixture } from './hostile'

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
