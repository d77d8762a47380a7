import { buildZip, type ZipSpec } from './hostile'

// Small, valid Word and PowerPoint packages built in code, for the layout tests: each part is the
// least OOXML Word/PowerPoint and officeparser need, so a test shows exactly what it feeds in.

const encoder = new TextEncoder()
const part = (name: string, xml: string): ZipSpec => ({ name, data: encoder.encode(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>${xml}`) })

const W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
const P = 'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"'
const REL = 'http://schemas.openxmlformats.org/officeDocument/2006/relationships'
const MAIN = 'application/vnd.openxmlformats-officedocument'

function relationships(list: Array<[id: string, type: string, target: string]>): string {
  const items = list.map(([id, type, target]) => `<Relationship Id="${id}" Type="${REL}/${type}" Target="${target}"/>`).join('')
  return `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">${items}</Relationships>`
}

function contentTypes(overrides: Array<[part: string, type: string]>): string {
  const items = overrides.map(([name, type]) => `<Override PartName="/${name}" ContentType="${MAIN}.${type}"/>`).join('')
  return `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>${items}</Types>`
}

const PAGE_KINDS = ['default', 'first', 'even']

/** A Word paragraph of one run. */
export const para = (text: string) => `<w:p><w:r><w:t xml:space="preserve">${text}</w:t></w:r></w:p>`
/** A paragraph of `runs` (run XML). */
export const p = (...runs: string[]) => `<w:p>${runs.join('')}</w:p>`
/** A run of `content` (run content XML), with run properties `properties`. */
export const r = (content: string, properties = '') => `<w:r>${properties ? `<w:rPr>${properties}</w:rPr>` : ''}${content}</w:r>`
/** A text element, its spaces kept. */
export const t = (value: string) => `<w:t xml:space="preserve">${value}</w:t>`
/** A Word table: rows of cells, each cell its block XML (paragraphs, tables). */
export const table = (rows: string[][]) => `<w:tbl>${rows.map(row => `<w:tr>${row.map(cell => `<w:tc>${cell}</w:tc>`).join('')}</w:tr>`).join('')}</w:tbl>`

/** A run referencing footnote (endnote) `id`, placed right after the run it annotates. */
export const noteReference = (kind: 'footnote' | 'endnote', id: number) => `<w:r><w:${kind}Reference w:id="${id}"/></w:r>`

/** A footnote's or endnote's definition: Word's reference mark run, then its paragraphs. */
export const note = (kind: 'footnote' | 'endnote', id: number, ...lines: string[]) =>
  `<w:${kind} w:id="${id}">${lines.map((line, index) => `<w:p>${index === 0 ? `<w:r><w:${kind}Ref/></w:r>` : ''}<w:r><w:t xml:space="preserve">${line}</w:t></w:r></w:p>`).join('')}</w:${kind}>`

/** Word's separator notes (ids -1 and 0), which every notes part starts with: no text. */
const separators = (kind: 'footnote' | 'endnote') =>
  `<w:${kind} w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:${kind}><w:${kind} w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/></w:r></w:p></w:${kind}>`

interface DocxOptions {
  headers?: string[]
  footers?: string[]
  main?: string
  /** The footnotes, endnotes and comments parts' contents (note() and <w:comment> elements). */
  footnotes?: string
  endnotes?: string
  comments?: string
  /** Chart parts (chartPart()), shown by docxChart(n) paragraphs. */
  charts?: string[]
  /** What the body's w:sectPr holds; by default pageReferences() of the headers and footers. */
  sectPr?: string
  /** A settings part's content (`<w:evenAndOddHeaders/>`), named by the main document. */
  settings?: string
}

/**
 * A reference to each of `headers` header parts, then `footers` footer parts (relationship ids
 * rId1, rId2… in that order, as docx() names them), by kind of page (default, first, even) in turn.
 */
export function pageReferences(headers: number, footers: number): string {
  const kinds = [...Array.from({ length: headers }, (_, index) => ['header', index] as const), ...Array.from({ length: footers }, (_, index) => ['footer', index] as const)]
  return kinds.map(([kind, index], id) => `<w:${kind}Reference w:type="${PAGE_KINDS[index % 3]}" r:id="rId${id + 1}"/>`).join('')
}

/**
 * A DOCX whose body is `body` (block XML), with a header and a footer part per entry of `headers`
 * and `footers` (block XML each, one section naming them all unless `sectPr` says otherwise), its
 * main part at `main`, and footnotes, endnotes, comments and settings parts when given.
 */
export function docx(body: string, options: DocxOptions = {}): Uint8Array {
  return buildZip(docxParts(body, options))
}

/** The parts of docx(), to build it with a lying header, say. */
export function docxParts(body: string, options: DocxOptions = {}): ZipSpec[] {
  const { headers = [], footers = [], main = 'word/document.xml' } = options
  const file = main.slice('word/'.length)
  const kinds = [...headers.map((xml, index) => ['header', index + 1, xml] as const), ...footers.map((xml, index) => ['footer', index + 1, xml] as const)]
  const sectPr = options.sectPr ?? pageReferences(headers.length, footers.length)
  const extras = (['footnotes', 'endnotes', 'comments', 'settings'] as const).flatMap(name => {
    const xml = options[name]
    if (xml === undefined) return []
    const content = name === 'comments' || name === 'settings' ? xml : separators(name === 'footnotes' ? 'footnote' : 'endnote') + xml
    return [{ name, xml: `<w:${name} ${W}>${content}</w:${name}>` }]
  })
  const charts = options.charts ?? []
  const partRels = [
    ...kinds.map(([kind, n], index): [string, string, string] => [`rId${index + 1}`, kind, `${kind}${n}.xml`]),
    ...extras.map(({ name }, index): [string, string, string] => [`rIdN${index + 1}`, name, `${name}.xml`]),
    ...charts.map((_, index): [string, string, string] => [`rIdK${index + 1}`, 'chart', `charts/chart${index + 1}.xml`]),
  ]
  return [
    part('[Content_Types].xml', contentTypes([
      [main, 'wordprocessingml.document.main+xml'],
      ...kinds.map(([kind, n]) => [`word/${kind}${n}.xml`, `wordprocessingml.${kind}+xml`] as [string, string]),
      ...extras.map(({ name }) => [`word/${name}.xml`, `wordprocessingml.${name}+xml`] as [string, string]),
      ...charts.map((_, index) => [`word/charts/chart${index + 1}.xml`, 'drawingml.chart+xml'] as [string, string]),
    ])),
    part('_rels/.rels', relationships([['rId1', 'officeDocument', main]])),
    part(main, `<w:document ${W}><w:body>${body}<w:sectPr>${sectPr}</w:sectPr></w:body></w:document>`),
    part(`word/_rels/${file}.rels`, relationships(partRels)),
    ...kinds.map(([kind, n, xml]) => part(`word/${kind}${n}.xml`, `<w:${kind === 'header' ? 'hdr' : 'ftr'} ${W}>${xml}</w:${kind === 'header' ? 'hdr' : 'ftr'}>`)),
    ...extras.map(({ name, xml }) => part(`word/${name}.xml`, xml)),
    ...charts.map((xml, index) => part(`word/charts/chart${index + 1}.xml`, xml)),
  ]
}

/** A text box shape of one paragraph per line, on a slide or a notes page. */
export const textBox = (...lines: string[]) =>
  `<p:sp><p:nvSpPr><p:cNvPr id="2" name="Text"/><p:cNvSpPr txBox="1"/><p:nvPr/></p:nvSpPr><p:spPr/><p:txBody><a:bodyPr/>${lines.map(line => `<a:p><a:r><a:t>${line}</a:t></a:r></a:p>`).join('')}</p:txBody></p:sp>`

/** The slide-number placeholder PowerPoint puts on every notes page, showing `n`. */
export const slideNumber = (n: number) =>
  `<p:sp><p:nvSpPr><p:cNvPr id="4" name="Slide Number Placeholder 3"/><p:cNvSpPr/><p:nvPr><p:ph type="sldNum" idx="5"/></p:nvPr></p:nvSpPr><p:spPr/><p:txBody><a:bodyPr/><a:p><a:fld id="{B6F15528-21DE-4FAA-801E-634DDDAF4B2B}" type="slidenum"><a:t>${n}</a:t></a:fld></a:p></p:txBody></p:sp>`

/** A slide's footer (`ftr`), date (`dt`) or slide-number (`sldNum`) placeholder, or a notes page's header (`hdr`), showing `text`, as PowerPoint copies them onto every slide and notes page. */
export const placeholder = (type: 'ftr' | 'dt' | 'sldNum' | 'hdr', text: string) =>
  `<p:sp><p:nvSpPr><p:cNvPr id="9" name="${type} Placeholder"/><p:cNvSpPr><a:spLocks noGrp="1"/></p:cNvSpPr><p:nvPr><p:ph type="${type}" sz="quarter" idx="12"/></p:nvPr></p:nvSpPr><p:spPr/><p:txBody><a:bodyPr/><a:p>${type === 'ftr' || type === 'hdr' ? `<a:r><a:t>${text}</a:t></a:r>` : `<a:fld id="{B6F15528-21DE-4FAA-801E-634DDDAF4B2B}" type="${type === 'dt' ? 'datetime1' : 'slidenum'}"><a:t>${text}</a:t></a:fld>`}</a:p></p:txBody></p:sp>`

/** A picture shape (its image not in the package: officeparser reads no text from it either way). */
export const picture = '<p:pic><p:nvPicPr><p:cNvPr id="3" name="Picture"/><p:cNvPicPr/><p:nvPr/></p:nvPicPr><p:blipFill><a:blip r:embed="rId9"/></p:blipFill><p:spPr/></p:pic>'

/** A drawing (run content) showing the document's chart `n` (1-based, in the order of docx()'s `charts`). */
export const chartDrawing = (n: number) =>
  `<w:drawing><wp:inline xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"><wp:docPr id="${n}" name="Chart ${n}"/><a:graphic xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/chart"><c:chart xmlns:c="http://schemas.openxmlformats.org/drawingml/2006/chart" r:id="rIdK${n}"/></a:graphicData></a:graphic></wp:inline></w:drawing>`

/**
 * A drawing (run content) showing a picture (its image not in the package), its wp:docPr carrying
 * `attributes` (descr, title) and holding `inside` (an a:extLst marking it decorative, say); inline,
 * or anchored (floating).
 */
export const pictureDrawing = (attributes: string, placed: 'inline' | 'anchor' = 'inline', inside = '') =>
  `<w:drawing><wp:${placed} xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"><wp:docPr id="1" name="Picture 1" ${attributes}>${inside}</wp:docPr><a:graphic xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/picture"><pic:pic xmlns:pic="http://schemas.openxmlformats.org/drawingml/2006/picture"><pic:blipFill><a:blip r:embed="rId99"/></pic:blipFill></pic:pic></a:graphicData></a:graphic></wp:${placed}></w:drawing>`

/** A Word paragraph showing the document's chart `n`. */
export const docxChart = (n: number) => p(r(chartDrawing(n)))

/** A chart frame showing the slide's chart `n` (1-based, in the order of the slide's `charts`). */
export const chartFrame = (n: number) =>
  `<p:graphicFrame><p:nvGraphicFramePr><p:cNvPr id="${10 + n}" name="Chart ${n}"/><p:cNvGraphicFramePr/><p:nvPr/></p:nvGraphicFramePr><p:xfrm/><a:graphic><a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/chart"><c:chart xmlns:c="http://schemas.openxmlformats.org/drawingml/2006/chart" r:id="rIdC${n}"/></a:graphicData></a:graphic></p:graphicFrame>`

const C = 'xmlns:c="http://schemas.openxmlformats.org/drawingml/2006/chart" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'

/** A chart part: `chart` is what goes inside <c:chart> (title, plotArea…). */
export const chartPart = (chart: string) => `<c:chartSpace ${C}><c:chart>${chart}</c:chart></c:chartSpace>`

interface PptxOptions {
  /** The slide list's order, as indexes into `slides` (their parts are numbered in `slides`' order). */
  order?: number[]
  /** XML after the slide list in the presentation part (a malformed one, say). */
  afterList?: string
}

/**
 * A PPTX of `slides` in order: each its shapes (XML), optionally its notes page's shapes, and the
 * chart parts its chart frames show (chartPart(); chartFrame(n) shows the n-th).
 */
export function pptx(slides: Array<{ shapes: string; notes?: string; charts?: string[]; hidden?: boolean }>, options: PptxOptions = {}): Uint8Array {
  const tree = (shapes: string) => `<p:cSld><p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>${shapes}</p:spTree></p:cSld>`
  const parts: ZipSpec[] = []
  const types: Array<[string, string]> = [['ppt/presentation.xml', 'presentationml.presentation.main+xml']]
  let notesPages = 0
  let charts = 0
  slides.forEach((slide, index) => {
    const n = index + 1
    const rels: Array<[string, string, string]> = []
    types.push([`ppt/slides/slide${n}.xml`, 'presentationml.slide+xml'])
    parts.push(part(`ppt/slides/slide${n}.xml`, `<p:sld ${P}${slide.hidden ? ' show="0"' : ''}>${tree(slide.shapes)}</p:sld>`))
    slide.charts?.forEach((xml, chart) => {
      const file = `chart${++charts}.xml`
      types.push([`ppt/charts/${file}`, 'drawingml.chart+xml'])
      parts.push(part(`ppt/charts/${file}`, xml))
      rels.push([`rIdC${chart + 1}`, 'chart', `../charts/${file}`])
    })
    if (slide.notes !== undefined) {
      // Notes pages are numbered in the order they were made, not by their slide's number.
      const page = ++notesPages
      types.push([`ppt/notesSlides/notesSlide${page}.xml`, 'presentationml.notesSlide+xml'])
      rels.push(['rId1', 'notesSlide', `../notesSlides/notesSlide${page}.xml`])
      parts.push(part(`ppt/notesSlides/notesSlide${page}.xml`, `<p:notes ${P}>${tree(slide.notes)}</p:notes>`))
      parts.push(part(`ppt/notesSlides/_rels/notesSlide${page}.xml.rels`, relationships([['rId1', 'slide', `../slides/slide${n}.xml`]])))
    }
    if (rels.length > 0) parts.push(part(`ppt/slides/_rels/slide${n}.xml.rels`, relationships(rels)))
  })
  const order = options.order ?? slides.map((_, index) => index)
  const list = order.map(index => `<p:sldId id="${256 + index}" r:id="rId${index + 1}"/>`).join('')
  return buildZip([
    part('[Content_Types].xml', contentTypes(types)),
    part('_rels/.rels', relationships([['rId1', 'officeDocument', 'ppt/presentation.xml']])),
    part('ppt/presentation.xml', `<p:presentation ${P}><p:sldIdLst>${list}</p:sldIdLst>${options.afterList ?? ''}</p:presentation>`),
    part('ppt/_rels/presentation.xml.rels', relationships(slides.map((_, index) => [`rId${index + 1}`, 'slide', `slides/slide${index + 1}.xml`]))),
    ...parts,
  ])
}
