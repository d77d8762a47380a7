import * as XLSX from '@e965/xlsx'
import { Parser } from 'htmlparser2'
import { oneLine, walk, type Node } from './office-layout'
import { TextCapExceeded } from './types'
import { attribute, mainPart } from './sniff'
import { readSmallEntry, type ZipEntry } from './zip-guard'

// A DrawingML chart part (ppt/charts/chartN.xml) as text: the numbers a slide's chart shows,
// which officeparser leaves out unless it also extracts every image (extractAttachments), and
// then writes as one flat list (title, labels, then each series' values in turn). Here a chart
// is a table, laid out as a sheet is:
//
//   [Chart: Revenue by quarter]
//   Category axis: Quarter
//   	Revenue	Costs
//   Q1	10.5	7
//
// one row per category, one column per series, each value as the chart's number format shows
// it. The values come from the part's caches (what PowerPoint draws); the embedded workbook is
// not read. Series hidden by a filter (kept under extLst) are left out, as the chart leaves them.

interface Series {
  name: string
  /** Values by point index. */
  values: Map<number, string>
  /** Category labels by point index (c:cat or a scatter chart's c:xVal); multi-level labels joined. */
  categories: Map<number, string>
}

interface Chart {
  title: string
  axisTitles: Array<{ kind: string; title: string }>
  series: Series[]
}

const AXES: Readonly<Record<string, string>> = { catAx: 'Category axis', valAx: 'Value axis', dateAx: 'Date axis', serAx: 'Series axis' }

/** The local name of a prefixed element: charts are written with any prefix (c:, cs:) or none. */
const local = (name: string) => name.slice(name.indexOf(':') + 1)

/**
 * Reads a chart part. `budget.points` is how many values the whole document's charts may still
 * hold: a point costs at least two bytes of text (a value and its tab), so a chart holding more
 * than the text cap allows is refused while it is read, before its table is built.
 */
export function readChart(xml: string, budget: { points: number }): Chart {
  const chart: Chart = { title: '', axisTitles: [], series: [] }
  const stack: string[] = []
  let skipTo = -1 // the depth of an extLst being skipped (filtered series, vendor extensions)
  let titles = 0 // the titles open: a depth count, not a search of the stack (hostile nesting)
  let text = ''
  let titleText = ''
  let series: Series | undefined
  let target: 'name' | 'values' | 'categories' | undefined
  let levels: Array<Map<number, string>> = [] // a multi-level category's levels, innermost first
  let cacheFormat: string | undefined // the number format of the numeric cache being read; undefined for text
  let pointIndex = -1
  let pointFormat: string | undefined

  const parser = new Parser(
    {
      onopentag(raw, attributes) {
        const name = local(raw)
        stack.push(name)
        text = ''
        if (skipTo >= 0) return
        switch (name) {
          case 'extLst':
            skipTo = stack.length
            break
          case 'title':
            titles++
            break
          case 'ser':
            series = { name: '', values: new Map(), categories: new Map() }
            chart.series.push(series)
            break
          case 'tx':
            if (series && stack.at(-2) === 'ser') target = 'name'
            break
          case 'val':
          case 'yVal':
            if (series) target = 'values'
            break
          case 'cat':
          case 'xVal':
            if (series) target = 'categories'
            levels = []
            break
          case 'lvl':
            levels.push(new Map())
            break
          case 'numCache':
          case 'numLit':
            cacheFormat = 'General'
            break
          case 'strCache':
          case 'strLit':
          case 'multiLvlStrCache':
            cacheFormat = undefined
            break
          case 'pt':
            pointIndex = Number(attributes.idx)
            pointFormat = attributes.formatCode
        }
      },
      ontext(data) {
        if (skipTo < 0) text += data
      },
      onclosetag(raw) {
        const name = local(raw)
        stack.pop()
        if (skipTo >= 0) {
          if (stack.length < skipTo) skipTo = -1
          return
        }
        switch (name) {
          case 't':
            if (titles > 0) titleText += text
            break
          case 'p':
            if (titles > 0 && titleText !== '' && !titleText.endsWith(' ')) titleText += ' '
            break
          case 'title':
            titles--
            closeTitle()
            break
          case 'formatCode':
            if (cacheFormat !== undefined) cacheFormat = text.trim() || 'General'
            break
          case 'v':
            closeValue()
            break
          case 'ser':
            series = undefined
            target = undefined
            break
          case 'tx':
          case 'val':
          case 'yVal':
            if (name !== 'tx' || target === 'name') target = undefined
            break
          case 'cat':
          case 'xVal':
            closeCategories()
        }
      },
    },
    { xmlMode: true, decodeEntities: true },
  )

  function closeTitle(): void {
    const title = oneLine(titleText)
    titleText = ''
    if (title === '') return
    const owner = stack.at(-1)
    if (owner !== undefined && Object.hasOwn(AXES, owner)) chart.axisTitles.push({ kind: AXES[owner]!, title })
    else if (owner === 'chart' && chart.title === '') chart.title = title
  }

  function closeValue(): void {
    // A title given by reference (c:strRef) holds its text in a cached point.
    if (titles > 0) {
      titleText += text
      return
    }
    if (!series || target === undefined) return
    const raw = oneLine(text)
    if (target === 'name') {
      series.name ||= raw
      return
    }
    if (!Number.isSafeInteger(pointIndex) || pointIndex < 0 || raw === '') return
    if (--budget.points < 0) throw new TextCapExceeded()
    const value = cacheFormat === undefined ? raw : shown(raw, pointFormat ?? cacheFormat)
    if (target === 'values') series.values.set(pointIndex, value)
    else (levels.at(-1) ?? series.categories).set(pointIndex, value)
  }

  // A multi-level category's label: each level's label for the point's group (a level names a
  // group at its first point only), outermost first.
  function closeCategories(): void {
    target = undefined
    if (!series || levels.length === 0) return
    const sorted = levels.map(labels => [...labels.entries()].sort((a, b) => a[0] - b[0]))
    const labels = sorted[0]!.map(([index, label]) => ({ index, parts: [label] }))
    // Both sorted by point: each outer level is walked once beside the innermost.
    for (const outer of sorted.slice(1)) {
      let group = -1
      for (const label of labels) {
        while (group + 1 < outer.length && outer[group + 1]![0] <= label.index) group++
        if (group >= 0) label.parts.unshift(outer[group]![1])
      }
    }
    for (const { index, parts } of labels) series.categories.set(index, parts.join(' / '))
  }

  parser.end(xml)
  return chart
}

/** A cached value as the chart shows it: its number format applied (a General number kept whole). */
function shown(value: string, format: string): string {
  const number = Number(value)
  if (!Number.isFinite(number)) return value
  if (format === 'General') return Number.isSafeInteger(number) ? String(number) : oneLine(XLSX.SSF.format('General', number))
  try {
    return oneLine(XLSX.SSF.format(format, number)) || value
  } catch {
    return value
  }
}

/** A chart's lines, counted against `budget.bytes` (the text the document may still hold). */
export function chartLines(chart: Chart, budget: { bytes: number }): string[] {
  const lines = [chart.title === '' ? '[Chart]' : `[Chart: ${chart.title}]`, ...chart.axisTitles.map(({ kind, title }) => `${kind}: ${title}`)]
  const series = chart.series.filter(one => one.values.size > 0 || one.name !== '')
  if (series.length > 0) {
    const categories = new Map<number, string>()
    for (const one of series) for (const [index, label] of one.categories) if (!categories.has(index)) categories.set(index, label)
    const indexes = [...new Set([...categories.keys(), ...series.flatMap(one => [...one.values.keys()])])].sort((a, b) => a - b)
    lines.push('\t' + series.map((one, index) => one.name || `Series ${index + 1}`).join('\t'))
    for (const index of indexes) {
      const cells = [categories.get(index) ?? String(index + 1), ...series.map(one => one.values.get(index) ?? '')]
      lines.push(cells.join('\t').replace(/\t+$/, ''))
    }
  }
  for (const line of lines) {
    budget.bytes -= Buffer.byteLength(line) + 1
    if (budget.bytes < 0) throw new TextCapExceeded()
  }
  return lines
}

/**
 * Gives each chart node of a presentation's AST (officeparser's `chart`, named by its part's file
 * name) its chart's lines as text, read from the package's `ppt/charts/` part. A chart whose part is
 * missing or unreadable keeps its empty text, as before; the charts' text together is held to
 * `maxTextBytes`.
 */
export function fillCharts(nodes: Node[], bytes: Uint8Array, entries: ZipEntry[], maxTextBytes: number): void {
  const budget = { points: Math.floor(maxTextBytes / 2), bytes: maxTextBytes }
  const decoder = new TextDecoder()
  walk(nodes, node => {
    if (node.type !== 'chart') return !!node.children?.length
    const name = node.metadata?.attachmentName
    const entry = typeof name === 'string' ? entries.find(one => one.name === `ppt/charts/${name}`) : undefined
    const xml = entry && readSmallEntry(bytes, entry, entry.uncompressedSize)
    if (xml) node.text = chartLines(readChart(decoder.decode(xml), budget), budget).join('\n')
    return false
  })
}

/**
 * A Word document's charts, in the order its main part shows them, as lines to follow the body:
 * officeparser gives a chart in a paragraph no node, so where it stood is not known. Read only
 * when the package holds a chart part.
 */
export function documentChartLines(bytes: Uint8Array, entries: ZipEntry[], maxTextBytes: number): string[] {
  if (!entries.some(entry => entry.name.startsWith('word/charts/'))) return []
  const main = entries.some(entry => entry.name === 'word/document.xml') ? 'word/document.xml' : mainPart(bytes, entries)
  if (main === undefined) return []
  const text = (name: string) => {
    const entry = entries.find(one => one.name === name)
    const data = entry && readSmallEntry(bytes, entry, entry.uncompressedSize)
    return data && new TextDecoder().decode(data)
  }
  const targets = new Map<string, string>()
  const folder = main.slice(0, main.lastIndexOf('/') + 1)
  for (const [tag] of (text(`${folder}_rels/${main.slice(folder.length)}.rels`) ?? '').matchAll(/<(?:[\w.-]+:)?Relationship\s[^>]*>/g)) {
    const id = attribute(tag, 'Id')
    const target = attribute(tag, 'Target')
    if (id === undefined || target === undefined || !attribute(tag, 'Type')?.endsWith('/relationships/chart') || attribute(tag, 'TargetMode') === 'External') continue
    // Relative to the main part's folder; a leading slash names the package root.
    targets.set(id, new URL(target, `http://package/${main}`).pathname.slice(1))
  }
  const budget = { points: Math.floor(maxTextBytes / 2), bytes: maxTextBytes }
  const lines: string[] = []
  const shown = new Set<string>()
  for (const [tag] of (text(main) ?? '').matchAll(/<(?:[\w.-]+:)?chart\s[^>]*>/g)) {
    const part = targets.get(attribute(tag, 'r:id') ?? '')
    if (part === undefined || shown.has(part)) continue
    shown.add(part)
    const xml = text(part)
    if (xml !== undefined) lines.push(...(lines.length > 0 ? [''] : []), ...chartLines(readChart(xml, budget), budget))
  }
  return lines
}
