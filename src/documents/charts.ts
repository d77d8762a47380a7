import * as XLSX from '@e965/xlsx'
import { Parser } from 'htmlparser2'
import { generalSectionShown, generalShown, hugeFormat, negativeShown } from './number-format'
import { oneLine } from './office-layout'
import { ElementCapExceeded, TextCapExceeded } from './types'

// A DrawingML chart part (ppt/charts/, word/charts/) as text: the numbers a chart shows, which
// officeparser leaves out (for a slide's, unless it also extracts every image, and then as one
// flat list: title, labels, each series' values in turn; a Word document's, always). Here a
// chart is a table, laid out as a sheet is:
//
//   [Chart: Revenue by quarter]
//   Category axis: Quarter
//   	Revenue	Costs
//   Q1	10.5	7
//
// one row per category, one column per series, each value as the chart's number format shows
// it. The values come from the part's caches (what PowerPoint draws); the embedded workbook is
// not read. Series hidden by a filter (kept under extLst) are left out, as the chart leaves them.
// (chart-parts.ts finds the parts; officeparser never reads them, so its limits do not apply, and
// every chart of a document is read under one ChartBudget instead.)

/**
 * What a document's charts may still take, all of them together: XML elements (as officeparser's
 * own cap counts a part's), values, the bytes of the text kept while reading (values, labels,
 * names, titles) and the bytes of the lines made. Each runs out with the document's refusal.
 */
export interface ChartBudget {
  elements: number
  /** A value costs at least two bytes of text (itself and its tab). */
  points: number
  held: number
  bytes: number
}

export const chartBudget = (maxTextBytes: number, maxElements: number): ChartBudget => ({ elements: maxElements, points: Math.floor(maxTextBytes / 2), held: maxTextBytes, bytes: maxTextBytes })

/** The most series one chart shows (Excel's limit); further ones are left out. */
const MAX_SERIES = 255
/** The most levels a multi-level category has read; further ones are left out. */
const MAX_LEVELS = 16

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

/** Reads a chart part, charging `budget` as it goes: a chart past it is refused before its table is built. */
export function readChart(xml: string, budget: ChartBudget): Chart {
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
        if (--budget.elements < 0) throw new ElementCapExceeded()
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
            if (chart.series.length === MAX_SERIES) break
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
            // An empty level (or one past the cap) is left out at its close.
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
            if (titles > 0) titleText += held(text)
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
          case 'lvl':
            if (levels.at(-1)?.size === 0 || levels.length > MAX_LEVELS) levels.pop()
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
      titleText += held(text)
      return
    }
    if (!series || target === undefined) return
    const raw = oneLine(text)
    if (target === 'name') {
      if (series.name === '') series.name = held(raw)
      return
    }
    if (!Number.isSafeInteger(pointIndex) || pointIndex < 0 || raw === '') return
    if (--budget.points < 0) throw new TextCapExceeded()
    const value = held(cacheFormat === undefined ? raw : shown(raw, pointFormat ?? cacheFormat))
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
    for (const { index, parts } of labels) series.categories.set(index, held(parts.join(' / ')))
  }

  function held(kept: string): string {
    budget.held -= Buffer.byteLength(kept)
    if (budget.held < 0) throw new TextCapExceeded()
    return kept
  }

  parser.end(xml)
  return chart
}

/**
 * A cached value as the chart shows it: its number format applied as a workbook's cell's is (a
 * General number kept whole; a negative half rounded away from zero), the raw value for a format
 * SheetJS would make huge text of or cannot read.
 */
function shown(value: string, format: string): string {
  const number = Number(value)
  if (!Number.isFinite(number)) return value
  if (format === 'General') return generalShown(number)
  if (hugeFormat(format) !== undefined) return value
  try {
    return oneLine(generalSectionShown(format, number) ?? (number < 0 ? negativeShown(format, number) : undefined) ?? XLSX.SSF.format(format, number)) || value
  } catch {
    return value
  }
}

/** A chart's lines, counted against `budget.bytes` (the text the document may still hold). */
export function chartLines(chart: Chart, budget: ChartBudget): string[] {
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
