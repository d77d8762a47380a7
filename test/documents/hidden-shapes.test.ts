import { describe, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { extractDocument } from '../../src/documents/extract'
import { withoutHiddenShapes } from '../../src/documents/hidden-shapes'
import { ElementCapExceeded, ExtractionError, type ExtractionLimits } from '../../src/documents/types'
import { readCentralDirectory, readSmallEntry } from '../../src/documents/zip-guard'
import { buildZip, fixture } from './hostile'
import { chartFrame, chartPart, placeholder, pptx, textBox } from './ooxml'

// A shape PowerPoint hides (Selection pane: hidden="1" on its p:cNvPr) is not read (README
// "Documents"), on decks built in code and on a LibreOffice-made one, through the real extractor.
const defaults = loadConfig({}).documents
const limits: ExtractionLimits = { maxTextBytes: defaults.maxTextBytes, zip: defaults.zip, pdf: defaults.pdf }
const text = async (bytes: Uint8Array) => (await extractDocument(bytes, limits)).text
const refusal = (bytes: Uint8Array) => extractDocument(bytes, limits).then(() => 'read', (error: ExtractionError) => error.message)

const PML = 'http://schemas.openxmlformats.org/presentationml/2006/main'
/** `shape` with `hidden` on its own non-visual properties (its first p:cNvPr). */
const hide = (shape: string, value = '1') => shape.replace('<p:cNvPr ', `<p:cNvPr hidden="${value}" `)
const tableFrame = (...cells: string[]) =>
  `<p:graphicFrame><p:nvGraphicFramePr><p:cNvPr id="20" name="Table"/><p:cNvGraphicFramePr/><p:nvPr/></p:nvGraphicFramePr><p:xfrm/><a:graphic><a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/table"><a:tbl><a:tr>${cells.map(cell => `<a:tc><a:txBody><a:bodyPr/><a:p><a:r><a:t>${cell}</a:t></a:r></a:p></a:txBody></a:tc>`).join('')}</a:tr></a:tbl></a:graphicData></a:graphic></p:graphicFrame>`
const group = (...shapes: string[]) => `<p:grpSp><p:nvGrpSpPr><p:cNvPr id="30" name="Group"/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>${shapes.join('')}</p:grpSp>`
const chart = chartPart('<c:title><c:tx><c:rich><a:p><a:r><a:t>Secret margins</a:t></a:r></a:p></c:rich></c:tx></c:title><c:plotArea/>')

describe('PPTX hidden shapes are left out (QA: their text was read)', () => {
  test('a hidden text box, table, group (with what it holds) and chart frame; "0" and "false" are shown', async () => {
    // Before: every "Hidden …" line below was in the slide's text, and the chart's too.
    const deck = pptx([
      {
        shapes:
          textBox('Café — visible') +
          hide(textBox('Hidden box')) +
          hide(textBox('Hidden too'), ' true ') +
          hide(tableFrame('Hidden', 'cells')) +
          tableFrame('Shown', 'cells') +
          hide(group(textBox('Hidden in group'), tableFrame('Hidden grouped cell'))) +
          group(textBox('Shown in group'), hide(textBox('Hidden in a shown group'))) +
          hide(chartFrame(1)) +
          hide(textBox('Shown: 0'), '0') +
          hide(textBox('Shown: false'), 'false') +
          textBox('Ünïcode after'),
        charts: [chart],
      },
    ])
    expect(await text(deck)).toBe('[Slide 1]\nCafé — visible\nShown\tcells\nShown in group\nShown: 0\nShown: false\nÜnïcode after')
  })

  test("a notes page's hidden shape; a hidden footer placeholder is not the slide's footer either", async () => {
    // Before: "Hidden note" was in the notes, and the hidden footer's text taken off the body's own line, then listed under [Footer].
    const deck = pptx([{ shapes: textBox('Confidential') + hide(placeholder('ftr', 'Confidential')), notes: textBox('Said aloud') + hide(textBox('Hidden note')) }])
    expect(await text(deck)).toBe('[Slide 1]\nConfidential\n[Notes]\nSaid aloud')
  })

  test('names are read by namespace: properties under another prefix bound to PresentationML hide the shape', async () => {
    const shape = `<p:sp><q:nvSpPr xmlns:q="${PML}"><q:cNvPr id="5" name="Q" hidden="1"/><q:cNvSpPr/><q:nvPr/></q:nvSpPr><p:spPr/><p:txBody><a:bodyPr/><a:p><a:r><a:t>Hidden by q</a:t></a:r></a:p></p:txBody></p:sp>`
    // A hidden="1" that is not the shape's own non-visual properties' (here a stray one in its text body) hides nothing.
    const stray = textBox('Not hidden').replace('<a:bodyPr/>', '<a:bodyPr/><p:cNvPr id="6" name="Stray" hidden="1"/>')
    expect(await text(pptx([{ shapes: textBox('Kept') + shape + stray }]))).toBe('[Slide 1]\nKept\nNot hidden')
  })

  test('a LibreOffice-made deck whose chart frame is hidden (the QA repro)', async () => {
    const bytes = await fixture('chart.pptx')
    const directory = readCentralDirectory(bytes, limits.zip)
    if (!directory.ok) throw new Error(directory.message)
    const parts = directory.entries.map(entry => {
      const data = readSmallEntry(bytes, entry, entry.uncompressedSize)!
      if (entry.name !== 'ppt/slides/slide1.xml') return { name: entry.name, data }
      return { name: entry.name, data: Buffer.from(Buffer.from(data).toString().replace(/(<p:graphicFrame>\s*<p:nvGraphicFramePr>\s*<p:cNvPr )/, '$1hidden="1" ')) }
    })
    expect(await text(buildZip(parts))).toBe('[Slide 1]\nQuarterly results')
  })

  test('a part that is not well-formed is refused as a DOCX part is; the element cap holds', async () => {
    const broken = pptx([{ shapes: hide(textBox('Hidden')) + '<p:sp>' }])
    expect(await refusal(broken)).toBe('the PPTX file is damaged: its part "ppt/slides/slide1.xml" is not well-formed XML')
    const deck = pptx([{ shapes: hide(textBox('Hidden')) }])
    const directory = readCentralDirectory(deck, limits.zip)
    if (!directory.ok) throw new Error(directory.message)
    expect(() => withoutHiddenShapes(deck, directory.entries, { maxElements: 10, zip: limits.zip })).toThrow(ElementCapExceeded)
  })
})
