import { describe, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { extractDocument } from '../../src/documents/extract'
import { ExtractionError, type ExtractionLimits } from '../../src/documents/types'
import { buildZip, fixture } from './hostile'
import { chartDrawing, chartFrame, chartPart, docx, docxChart, docxParts, note, noteReference, p, para, pptx, r, t, textBox } from './ooxml'

// Charts as tables (README "Documents"): before, a chart's numbers were lost (officeparser
// reads chart parts only while extracting every image, and then as one flat list).
const defaults = loadConfig({}).documents
const limits: ExtractionLimits = { maxTextBytes: defaults.maxTextBytes, zip: defaults.zip, pdf: defaults.pdf }
const text = async (bytes: Uint8Array, over: Partial<ExtractionLimits> = {}) => (await extractDocument(bytes, { ...limits, ...over })).text

const points = (values: Array<string | undefined>) => values.map((v, i) => (v === undefined ? '' : `<c:pt idx="${i}"><c:v>${v}</c:v></c:pt>`)).join('')
const strCache = (values: Array<string | undefined>) => `<c:strRef><c:f>Sheet1!$A$2</c:f><c:strCache><c:ptCount val="${values.length}"/>${points(values)}</c:strCache></c:strRef>`
const numCache = (values: Array<string | undefined>, format = 'General') =>
  `<c:numRef><c:f>Sheet1!$B$2</c:f><c:numCache><c:formatCode>${format}</c:formatCode><c:ptCount val="${values.length}"/>${points(values)}</c:numCache></c:numRef>`
const series = (name: string | undefined, categories: string, values: string) =>
  `<c:ser><c:idx val="0"/><c:order val="0"/>${name === undefined ? '' : `<c:tx>${strCache([name])}</c:tx>`}<c:cat>${categories}</c:cat><c:val>${values}</c:val></c:ser>`
const richTitle = (...paragraphs: string[]) => `<c:title><c:tx><c:rich><a:bodyPr/>${paragraphs.map(p => `<a:p><a:r><a:t>${p}</a:t></a:r></a:p>`).join('')}</c:rich></c:tx></c:title>`
const deck = (...charts: string[]) => pptx([{ shapes: textBox('Results') + charts.map((_, i) => chartFrame(i + 1)).join(''), charts: charts.map(chartPart) }])

describe('PPTX charts', () => {
  test('a LibreOffice-made bar chart of two series is read as a table under its title', async () => {
    expect(await text(await fixture('chart.pptx'))).toBe('[Slide 1]\nQuarterly results\n[Chart: Revenue by quarter]\n\tRevenue\tCosts\nQ1\t10.5\t7\nQ2\t12\t8.25\nQ3\t15\t9')
  })

  test("values are shown in the chart's number format, a date category as a date, axis titles named", async () => {
    const chart =
      richTitle('Share of', 'sales &amp; returns') +
      `<c:plotArea><c:lineChart>${series('Share', numCache(['45306', '45337'], 'yyyy-mm-dd'), numCache(['0.25', '0.125'], '0.0%'))}</c:lineChart>` +
      `<c:dateAx><c:axId val="1"/>${richTitle('Month')}</c:dateAx><c:valAx><c:axId val="2"/>${richTitle('Percent')}</c:valAx></c:plotArea>`
    expect(await text(deck(chart))).toBe('[Slide 1]\nResults\n[Chart: Share of sales & returns]\nDate axis: Month\nValue axis: Percent\n\tShare\n2024-01-15\t25.0%\n2024-02-15\t12.5%')
  })

  test('missing points stay empty cells, an unnamed series is named by its place, a General number keeps every digit', async () => {
    const chart = `<c:plotArea><c:barChart>${series('A', strCache(['x', 'y', 'z']), numCache(['4006381333931', undefined, '0.1']))}${series(undefined, strCache(['x', 'y', 'z']), numCache([undefined, '2']))}</c:barChart></c:plotArea>`
    expect(await text(deck(chart))).toBe('[Slide 1]\nResults\n[Chart]\n\tA\tSeries 2\nx\t4006381333931\ny\t\t2\nz\t0.1')
  })

  test('a series a filter hides (kept under extLst) is left out, as the chart leaves it out', async () => {
    const hidden = `<c:extLst><c:ext uri="{02D57815-91ED-43cb-92C2-25804820EDAC}"><c15:filteredBarSeries xmlns:c15="http://schemas.microsoft.com/office/drawing/2012/chart">${series('Hidden', strCache(['x']), numCache(['99']))}</c15:filteredBarSeries></c:ext></c:extLst>`
    const chart = `<c:plotArea><c:barChart>${series('Shown', strCache(['x']), numCache(['1']))}${hidden}</c:barChart></c:plotArea>`
    expect(await text(deck(chart))).toBe('[Slide 1]\nResults\n[Chart]\n\tShown\nx\t1')
  })

  test("multi-level categories are labelled by their groups, outermost first; a scatter chart's x values label its rows", async () => {
    const level = (values: Array<string | undefined>) => `<c:lvl>${points(values)}</c:lvl>`
    const multi = `<c:multiLvlStrRef><c:f>Sheet1!$A$2:$B$5</c:f><c:multiLvlStrCache><c:ptCount val="4"/>${level(['Jan', 'Feb', 'Jan', 'Feb'])}${level(['2025', undefined, '2026'])}</c:multiLvlStrCache></c:multiLvlStrRef>`
    const bars = `<c:plotArea><c:barChart>${series('Units', multi, numCache(['1', '2', '3', '4']))}</c:barChart></c:plotArea>`
    const scatter = `<c:plotArea><c:scatterChart><c:ser><c:idx val="0"/><c:order val="0"/><c:tx><c:v>Fit</c:v></c:tx><c:xVal>${numCache(['1.5', '3'])}</c:xVal><c:yVal>${numCache(['10', '20'])}</c:yVal></c:ser></c:scatterChart></c:plotArea>`
    expect(await text(deck(bars, scatter))).toBe('[Slide 1]\nResults\n[Chart]\n\tUnits\n2025 / Jan\t1\n2025 / Feb\t2\n2026 / Jan\t3\n2026 / Feb\t4\n[Chart]\n\tFit\n1.5\t10\n3\t20')
  })

  test('a chart whose part is missing leaves the slide readable', async () => {
    const bytes = pptx([{ shapes: textBox('Only text') + chartFrame(1) }])
    expect(await text(bytes)).toBe('[Slide 1]\nOnly text')
  })

  test("charts holding more values than the text cap allows are refused while they are read, as too long", async () => {
    // 40 points need at least 80 bytes of text: past a 64-byte cap before any table is built.
    const chart = `<c:plotArea><c:barChart>${series('S', strCache([]), numCache(Array.from({ length: 40 }, (_, i) => String(i))))}</c:barChart></c:plotArea>`
    const refused = await extractDocument(deck(chart), { ...limits, maxTextBytes: 64 }).catch(error => error)
    expect(refused).toBeInstanceOf(ExtractionError)
    expect((refused as Error).message).toMatch(/longer than the 64-byte limit/)
  })
})

describe('DOCX charts', () => {
  test('a LibreOffice-made chart follows the body (officeparser gives no node where it stood)', async () => {
    expect(await text(await fixture('chart.docx'))).toBe(
      'Figure 1 shows revenue by quarter.\n\nAfter the chart.\n\n[Chart: Revenue by quarter]\n\tRevenue\tCosts\nQ1\t10.5\t7\nQ2\t12\t8.25\nQ3\t15\t9',
    )
  })

  test('charts in the order the document shows them, each once, before the footnotes', async () => {
    const chart = (name: string, value: string) => chartPart(`<c:plotArea><c:pieChart>${series(name, strCache(['only']), numCache([value]))}</c:pieChart></c:plotArea>`)
    const body = para('Intro') + docxChart(2) + `<w:p><w:r><w:t>Noted</w:t></w:r>${noteReference('footnote', 1)}</w:p>` + docxChart(1) + docxChart(2)
    const bytes = docx(body, { charts: [chart('First part', '1'), chart('Second part', '2')], footnotes: note('footnote', 1, 'A note.') })
    expect(await text(bytes)).toBe('Intro\n\nNoted[^1]\n\n[Chart]\n\tSecond part\nonly\t2\n\n[Chart]\n\tFirst part\nonly\t1\n\n[Footnotes]\n[^1] A note.')
  })

  test('a chart Word does not show is not read: in hidden text, a deleted run, a placeholder, an alternate-content branch Word skips, a part other than the main one', async () => {
    // Before: chart references were read from the main part as it came, not as officeparser reads it rewritten.
    const chart = (name: string) => chartPart(`<c:plotArea><c:pieChart>${series(name, strCache(['only']), numCache(['1']))}</c:pieChart></c:plotArea>`)
    const charts = ['Hidden', 'Deleted', 'Placeholder', 'Skipped', 'Shown'].map(chart)
    const MC = 'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" xmlns:x="urn:made-up"'
    const body =
      p(r(t('Intro')), r(chartDrawing(1), '<w:vanish/>')) +
      p(`<w:del w:id="1" w:author="a">${r(chartDrawing(2))}</w:del>`) +
      p(`<w:sdt><w:sdtPr><w:showingPlcHdr/></w:sdtPr><w:sdtContent>${r(chartDrawing(3))}</w:sdtContent></w:sdt>`) +
      p(r(`<mc:AlternateContent ${MC}><mc:Choice Requires="x">${chartDrawing(4)}</mc:Choice><mc:Fallback>${t('Fallback')}</mc:Fallback></mc:AlternateContent>`)) +
      docxChart(5)
    expect(await text(docx(body, { charts }))).toBe('Intro\n\nFallback\n\n[Chart]\n\tShown\nonly\t1')
    // A document part the main one is not (Word Online's main part is word/document2.xml) shows no chart either.
    const main = docxParts(para('Main') + docxChart(1), { charts: [chart('Main')], main: 'word/document2.xml' })
    const stray = docxParts(para('Stray') + docxChart(2), { charts: [chart('Main'), chart('Stray')] }).filter(({ name }) => ['word/document.xml', 'word/_rels/document.xml.rels', 'word/charts/chart2.xml'].includes(name))
    expect(await text(buildZip([...main, ...stray]))).toBe('Main\n\n[Chart]\n\tMain\nonly\t1')
  })

  test("a header's, footer's or note's chart is read after its text, where that part is shown (before: not read)", async () => {
    const chart = (name: string) => chartPart(`<c:plotArea><c:pieChart>${series(name, strCache(['only']), numCache(['1']))}</c:pieChart></c:plotArea>`)
    const names = ['Header', 'FIRST-PAGE-SECRET', 'Footer', 'Note', 'UNREFERENCED-SECRET', 'Body', 'HIDDEN-SECRET']
    const withCharts = (part: string, charts: number[]) => ({
      name: `word/_rels/${part}.rels`,
      data: new TextEncoder().encode(`<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">${charts.map(n => `<Relationship Id="rIdK${n}" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/chart" Target="charts/chart${n}.xml"/>`).join('')}</Relationships>`),
    })
    const footnote = (id: number, text: string, chartShown: number) => `<w:footnote w:id="${id}"><w:p><w:r><w:footnoteRef/></w:r>${r(t(text))}</w:p>${docxChart(chartShown)}</w:footnote>`
    // A reference in an XML comment is no reference (before, the body's were read by pattern).
    const parts = docxParts(p(r(t('Body')), noteReference('footnote', 1)) + docxChart(6) + `<!-- ${docxChart(7)} -->`, {
      // The second header is a first-page one, and the section has no w:titlePg: no page shows it.
      headers: [para('Head') + docxChart(1) + p(r(chartDrawing(7), '<w:vanish/>')), para('First') + docxChart(2)],
      footers: [para('Foot') + docxChart(3)],
      footnotes: footnote(1, 'A note.', 4) + footnote(2, 'Never referenced.', 5),
      charts: names.map(chart),
    })
    const bytes = buildZip([...parts, withCharts('header1.xml', [1, 7]), withCharts('header2.xml', [2]), withCharts('footer1.xml', [3]), withCharts('footnotes.xml', [4, 5])])
    const read = await text(bytes)
    expect(read).not.toMatch(/SECRET/)
    expect(read).toBe(
      '[Header]\nHead\n[Chart]\n\tHeader\nonly\t1\n\nBody[^1]\n\n[Chart]\n\tBody\nonly\t1\n\n[Footnotes]\n[^1] A note.\n[Chart]\n\tNote\nonly\t1\n\n[Footer]\nFoot\n[Chart]\n\tFooter\nonly\t1',
    )
  })
})

describe('charts under the document limits (QA: small uploads that pinned a worker or took gigabytes)', () => {
  const values = (n: number) => numCache(Array.from({ length: n }, (_, i) => String(i)))

  test('a chart part shown by many frames is read once, shown at its first frame', async () => {
    // Before: re-inflated and re-read per frame (2,000 frames of a 1 MB part: 30 s of CPU, a 503).
    const bytes = pptx([{ shapes: textBox('Results') + chartFrame(1).repeat(3), charts: [chartPart(`<c:plotArea><c:barChart>${series('A', strCache(['x']), numCache(['1']))}</c:barChart></c:plotArea>`)] }])
    expect(await text(bytes)).toBe('[Slide 1]\nResults\n[Chart]\n\tA\nx\t1')
  })

  test('empty multi-level category levels are left out, and the labels stay', async () => {
    // A guard of the fix, which cannot be timed here: every inner label was walked once per level
    // (50,000 labels × 400,000 empty levels took 14.5 s, a 503); empty levels are now dropped, and
    // the element cap bounds the rest.
    const level = (values: string[]) => `<c:lvl>${points(values)}</c:lvl>`
    const labels = Array.from({ length: 20_000 }, (_, i) => `L${i}`)
    const multi = `<c:multiLvlStrRef><c:multiLvlStrCache>${level(labels)}${'<c:lvl/>'.repeat(100_000)}${level(['Top'])}</c:multiLvlStrCache></c:multiLvlStrRef>`
    const lines = (await text(deck(`<c:plotArea><c:barChart>${series('N', multi, values(2))}</c:barChart></c:plotArea>`))).split('\n')
    expect(lines.slice(3, 6)).toEqual(['\tN', 'Top / L0\t0', 'Top / L1\t1'])
    expect(lines).toHaveLength(3 + 1 + 20_000)
  })

  test("a chart of more elements than a document may hold is refused as such (officeparser's cap never sees chart parts)", async () => {
    // Before: 8 million empty <ser/> took 1.5 GB and answered an empty chart.
    const refused = await extractDocument(deck(`<c:plotArea><c:barChart>${'<c:ser/>'.repeat(600_000)}</c:barChart></c:plotArea>`), limits).catch(error => error)
    expect((refused as Error).message).toMatch(/holds more than 500,000 XML elements/)
  })

  test('a number format longer than Excel allows shows the raw values; a negative half rounds away from zero', async () => {
    // Before: a 100,000-character format applied to each of 5,000 values (1.66 GB), and -2.5 in `0` shown as -2.
    const long = `"${'A'.repeat(300)}"0`
    const chart = `<c:plotArea><c:barChart>${series('Long', strCache(['x', 'y']), numCache(['7', '8'], long))}${series('Neg', strCache(['x', 'y']), numCache(['-2.5', '-0.125'], '0.00'))}</c:barChart></c:plotArea>`
    expect(await text(deck(chart))).toBe('[Slide 1]\nResults\n[Chart]\n\tLong\tNeg\nx\t7\t-2.50\ny\t8\t-0.13')
    const rounding = `<c:plotArea><c:barChart>${series('R', strCache(['x']), numCache(['-2.5'], '0'))}</c:barChart></c:plotArea>`
    expect(await text(deck(rounding))).toBe('[Slide 1]\nResults\n[Chart]\n\tR\nx\t-3')
  })

  test('the text kept while reading counts against the cap: long joined labels are refused as they are made', async () => {
    // A guard: before, such labels were refused too, but only once all were made (1,000 labels
    // joined with a 1,000-character outer label took 2.1 GB first).
    const multi = `<c:multiLvlStrRef><c:multiLvlStrCache><c:lvl>${points(Array.from({ length: 100 }, (_, i) => `L${i}`))}</c:lvl><c:lvl>${points(['K'.repeat(1000)])}</c:lvl></c:multiLvlStrCache></c:multiLvlStrRef>`
    const refused = await extractDocument(deck(`<c:plotArea><c:barChart>${series('N', multi, values(1))}</c:barChart></c:plotArea>`), { ...limits, maxTextBytes: 50_000 }).catch(error => error)
    expect((refused as Error).message).toMatch(/longer than the 50000-byte limit/)
  })

  test('a DOCX chart part whose name holds a space is found through its percent-encoded target', async () => {
    const chart = chartPart(`<c:plotArea><c:pieChart>${series('S', strCache(['only']), numCache(['5']))}</c:pieChart></c:plotArea>`)
    const renamed = docxParts(para('Body') + docxChart(1), { charts: [chart] }).map(entry => {
      if (entry.name === 'word/charts/chart1.xml') return { ...entry, name: 'word/charts/Umsatz 2026.xml' }
      if (entry.name === 'word/_rels/document.xml.rels') return { ...entry, data: new TextEncoder().encode(new TextDecoder().decode(entry.data).replace('charts/chart1.xml', 'charts/Umsatz%202026.xml')) }
      return entry
    })
    expect(await text(buildZip(renamed))).toBe('Body\n\n[Chart]\n\tS\nonly\t5')
  })
})
