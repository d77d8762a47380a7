import { describe, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { rewriteDocx } from '../../src/documents/docx-package'
import { extractDocument } from '../../src/documents/extract'
import { ElementCapExceeded, type ExtractionLimits } from '../../src/documents/types'
import { readCentralDirectory } from '../../src/documents/zip-guard'
import { docx, p, r, t } from './ooxml'

// Headers and footers as Word shows them, section by section (docx-sections.ts). Before, every
// header and footer the main document's relationships named was read, whether or not a section
// showed it: a first-page header without w:titlePg, an even-page one without w:evenAndOddHeaders,
// one no section named at all, is text Word never shows, and it reached the model.
const defaults = loadConfig({}).documents
const limits: ExtractionLimits = { maxTextBytes: defaults.maxTextBytes, zip: defaults.zip, pdf: defaults.pdf }
const text = async (bytes: Uint8Array) => (await extractDocument(bytes, limits)).text

const WML = 'http://schemas.openxmlformats.org/wordprocessingml/2006/main'
const R = 'http://schemas.openxmlformats.org/officeDocument/2006/relationships'
const MC = 'http://schemas.openxmlformats.org/markup-compatibility/2006'
const W14 = 'http://schemas.microsoft.com/office/word/2010/wordml'
const line = (value: string) => p(r(t(value)))
const header = (type: string, id: number) => `<w:headerReference w:type="${type}" r:id="rId${id}"/>`
const footer = (type: string, id: number) => `<w:footerReference w:type="${type}" r:id="rId${id}"/>`
/** A paragraph ending a section whose properties are `properties`. */
const sectionEnd = (value: string, properties: string) => `<w:p><w:pPr><w:sectPr>${properties}</w:sectPr></w:pPr>${r(t(value))}</w:p>`

describe('which headers and footers a section shows', () => {
  test('a first-page header shows only in a section with w:titlePg on', async () => {
    const withTitlePage = (titlePg: string) => docx(line('Body'), { headers: [line('Every page'), line('COVER-SECRET')], sectPr: header('default', 1) + header('first', 2) + titlePg })
    expect(await text(withTitlePage(''))).toBe('[Header]\nEvery page\n\nBody')
    for (const off of ['0', 'false', 'off']) expect(await text(withTitlePage(`<w:titlePg w:val="${off}"/>`))).toBe('[Header]\nEvery page\n\nBody')
    expect(await text(withTitlePage('<w:titlePg/>'))).toBe('[Header]\nEvery page\nCOVER-SECRET\n\nBody')
    expect(await text(withTitlePage('<w:titlePg w:val="1"/>'))).toBe('[Header]\nEvery page\nCOVER-SECRET\n\nBody')
  })

  test('an even-page footer shows only when the settings have w:evenAndOddHeaders on', async () => {
    const withSettings = (settings?: string) => docx(line('Body'), { footers: [line('Odd'), line('EVEN-SECRET')], sectPr: footer('default', 1) + footer('even', 2), settings })
    expect(await text(withSettings())).toBe('Body\n\n[Footer]\nOdd')
    expect(await text(withSettings(''))).toBe('Body\n\n[Footer]\nOdd')
    expect(await text(withSettings('<w:evenAndOddHeaders w:val="false"/>'))).toBe('Body\n\n[Footer]\nOdd')
    expect(await text(withSettings('<w:evenAndOddHeaders/>'))).toBe('Body\n\n[Footer]\nOdd\nEVEN-SECRET')
  })

  test('a section without a reference of a type takes the previous section’s; one with its own replaces it', async () => {
    // Section 1 names a first-page header and footer but shows neither (no w:titlePg); section 2
    // turns the first page on and names a first-page header of its own: its footer is section 1's.
    const body = sectionEnd('One', header('default', 1) + header('first', 2) + footer('first', 4)) + line('Two')
    const document = docx(body, {
      headers: [line('Running head'), line('REPLACED-SECRET'), line('Chapter two')],
      footers: [line('Inherited cover footer')],
      sectPr: header('first', 3) + '<w:titlePg/>',
    })
    expect(await text(document)).toBe('[Header]\nRunning head\nChapter two\n\nOne\nTwo\n\n[Footer]\nInherited cover footer')
  })

  test('a header a relationship names but no section references is left out', async () => {
    expect(await text(docx(line('Body'), { headers: [line('Shown'), line('UNREFERENCED-SECRET')], sectPr: header('default', 1) }))).toBe('[Header]\nShown\n\nBody')
    expect(await text(docx(line('Body'), { headers: [line('UNREFERENCED-SECRET')], sectPr: '' }))).toBe('Body')
  })

  test('names are read by namespace; a section in alternate content is the branch Word shows', async () => {
    const headers = [line('Head'), line('FIRST-SECRET')]
    const shows = (sectionProperties: string) => text(docx(`<w:p><w:pPr>${sectionProperties}</w:pPr>${r(t('Body'))}</w:p>`, { headers, sectPr: '' }))
    const prefixed = `<q:sectPr xmlns:q="${WML}" xmlns:x="${R}"><q:headerReference q:type="default" x:id="rId1"/><q:headerReference q:type="first" x:id="rId2"/><q:titlePg/></q:sectPr>`
    expect(await shows(prefixed)).toBe('[Header]\nHead\nFIRST-SECRET\n\nBody')
    // An id in another namespace is not a relationship's, nor is an element of another namespace a reference.
    expect(await shows(`<w:sectPr>${header('default', 1)}<w:headerReference w:type="first" x:id="rId2" xmlns:x="urn:x"/><w:titlePg/></w:sectPr>`)).toBe('[Header]\nHead\n\nBody')
    expect(await shows(`<w:sectPr>${header('default', 1)}<q:headerReference xmlns:q="urn:x" q:type="first" r:id="rId2"/><w:titlePg/></w:sectPr>`)).toBe('[Header]\nHead\n\nBody')
    const alternate = (choice: string, fallback: string, requires = 'w14') =>
      `<mc:AlternateContent xmlns:mc="${MC}"><mc:Choice Requires="${requires}" xmlns:w14="${W14}" xmlns:x="urn:made-up">${choice}</mc:Choice><mc:Fallback>${fallback}</mc:Fallback></mc:AlternateContent>`
    const plain = `<w:sectPr>${header('default', 1)}</w:sectPr>`
    const titled = `<w:sectPr>${header('default', 1)}${header('first', 2)}<w:titlePg/></w:sectPr>`
    expect(await shows(alternate(plain, titled))).toBe('[Header]\nHead\n\nBody')
    expect(await shows(alternate(titled, plain, 'x'))).toBe('[Header]\nHead\n\nBody')
    expect(await shows(alternate(plain, titled, 'x'))).toBe('[Header]\nHead\nFIRST-SECRET\n\nBody')
  })

  test('a section break counts only in a body paragraph: not in a table cell or a text box (before: their headers were read)', async () => {
    // Word puts no section break in a table cell or a text box: a w:sectPr there names headers no page shows.
    const hidden = sectionEnd('In a cell', header('default', 2) + header('first', 3) + '<w:titlePg/>')
    const box = `<w:drawing><wp:anchor xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"><a:graphic xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><a:graphicData><wps:wsp xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"><wps:txbx><w:txbxContent>${sectionEnd('In a box', header('default', 2))}</w:txbxContent></wps:txbx></wps:wsp></a:graphicData></a:graphic></wp:anchor></w:drawing>`
    const headers = [line('Head'), line('CELL-SECRET'), line('FIRST-SECRET')]
    const body = `<w:tbl><w:tr><w:tc>${hidden}</w:tc></w:tr></w:tbl>` + p(r(t('Boxed')), r(box)) + line('Body')
    expect(await text(docx(body, { headers, sectPr: header('default', 1) }))).toBe('[Header]\nHead\n\nIn a cell\nBoxed\nIn a box\nBody')
    // In a content control or custom XML standing in the body, a paragraph is the body's: its break counts.
    for (const wrap of [(xml: string) => `<w:sdt><w:sdtPr/><w:sdtContent>${xml}</w:sdtContent></w:sdt>`, (xml: string) => `<w:customXml w:element="x">${xml}</w:customXml>`]) {
      const shown = wrap(sectionEnd('Contents', header('default', 2)))
      expect(await text(docx(shown + line('Body'), { headers: [line('Head'), line('Contents head')], sectPr: header('default', 1) }))).toBe('[Header]\nHead\nContents head\n\nContents\nBody')
    }
  })

  test('the sections are read in linear time, within the element budget', () => {
    const zip = { maxEntries: 100, maxInflatedBytes: 64 << 20, maxRatio: 1000 }
    const rewrite = (bytes: Uint8Array, maxElements: number) => {
      const directory = readCentralDirectory(bytes, zip)
      if (!directory.ok) throw new Error(directory.message)
      return rewriteDocx(bytes, directory.entries, { maxElements, zip }).bytes
    }
    const sections = sectionEnd('x', header('default', 1) + header('first', 2) + '<w:titlePg/>').repeat(50_000)
    const started = performance.now()
    expect(rewrite(docx(sections, { headers: [line('Head'), line('First')] }), 1_000_000)).toBeInstanceOf(Uint8Array)
    expect(performance.now() - started).toBeLessThan(5000)
    // A main document with nothing else to rewrite still counts its elements once its sections are read.
    expect(() => rewrite(docx('<w:p/>'.repeat(6000), { headers: [line('Head')] }), 5000)).toThrow(ElementCapExceeded)
  })
})
