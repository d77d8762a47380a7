import { scanXml, type PackageParts } from './package-parts'

// A Word list item's label, as Word shows it before the item: "1.", "a)", "2.1", or a bullet.
// officeparser gives each item its list (`listId`, the numbering instance w:numId), its level
// (`indentation`, w:ilvl) and whether it is ordered, but not its label: contracts and policies
// lost their clause numbers ("as stated in clause 2" pointed nowhere). The formats come from
// word/numbering.xml (each level's start, number format and label text, `%1.%2`); the counting
// follows the items in reading order, a deeper level restarting under each new item above it.

interface Level {
  start: number
  format: string
  text: string
}

/** The longest label text read (Word's are a few characters; a longer one is a hostile file's, and each item would repeat it). */
const MAX_LABEL_TEXT = 64
/** Word's levels: 0 to 8. */
const LEVELS = 9
/** Word's largest start value; a larger one (a hostile file's) is taken as 1. */
const MAX_START = 32767
const number = (value: string | undefined, fallback: number) => (value !== undefined && /^\d{1,5}$/.test(value) && Number(value) <= MAX_START ? Number(value) : fallback)

/** Levels by numbering instance (w:numId), read from numbering.xml; empty without one. */
export function readNumbering(parts: PackageParts): Map<string, Level[]> {
  const xml = parts.text('word/numbering.xml')
  const byInstance = new Map<string, Level[]>()
  if (xml === undefined) return byInstance
  const abstract = new Map<string, Level[]>()
  const instances: Array<{ id: string; abstractId: string; starts: Map<number, number> }> = []
  let levels: Level[] | undefined
  let level: Level | undefined
  let instance: (typeof instances)[number] | undefined
  let override = -1
  scanXml(xml, (name, attributes) => {
    const value = attributes['w:val']
    if (name === 'w:abstractNum') abstract.set(attributes['w:abstractNumId'] ?? '', (levels = []))
    else if (name === 'w:num') instances.push((instance = { id: attributes['w:numId'] ?? '', abstractId: '', starts: new Map() }))
    else if (name === 'w:abstractNumId' && instance) instance.abstractId = value ?? ''
    else if (name === 'w:lvlOverride') override = number(attributes['w:ilvl'], -1)
    else if (name === 'w:startOverride' && instance && override >= 0 && override < LEVELS) instance.starts.set(override, number(value, 1))
    else if (name === 'w:lvl' && levels) {
      const at = number(attributes['w:ilvl'], -1)
      level = { start: 1, format: 'decimal', text: `%${at + 1}.` }
      if (at >= 0 && at < LEVELS) levels[at] = level
    } else if (name === 'w:start' && level) level.start = number(value, 1)
    else if (name === 'w:numFmt' && level) level.format = value ?? 'decimal'
    else if (name === 'w:lvlText' && level && (value ?? '').length <= MAX_LABEL_TEXT) level.text = value ?? ''
  })
  for (const { id, abstractId, starts } of instances) {
    const base = abstract.get(abstractId) ?? []
    byInstance.set(id, base.map((each, index) => (each && starts.has(index) ? { ...each, start: starts.get(index)! } : each)))
  }
  return byInstance
}

/** The labels of a document's list items, counted in reading order. */
export class ListLabels {
  private readonly counters = new Map<string, number[]>()

  constructor(private readonly numbering: Map<string, Level[]>) {}

  /** The label of a list item (officeparser's `list` node metadata), with a space, indented two spaces a level. */
  label(metadata: Record<string, unknown> | undefined): string {
    const depth = Math.min(Math.max(Number(metadata?.indentation ?? 0) | 0, 0), 8)
    const listId = String(metadata?.listId ?? '')
    const levels = this.numbering.get(listId)
    const level = levels?.[depth]
    const counts = this.counters.get(listId) ?? []
    this.counters.set(listId, counts)
    counts[depth] = (counts[depth] ?? (level?.start ?? 1) - 1) + 1
    counts.length = depth + 1 // deeper levels restart under this item
    let label: string
    if (level === undefined) label = metadata?.listType === 'ordered' ? `${counts[depth]}.` : '-'
    else if (level.format === 'bullet') label = '-'
    else if (level.format === 'none') label = ''
    else {
      label = level.text.replace(/%([1-9])/g, (_, n: string) => {
        const at = Number(n) - 1
        return formatNumber(counts[at] ?? levels?.[at]?.start ?? 1, levels?.[at]?.format ?? 'decimal')
      })
    }
    return '  '.repeat(depth) + (label === '' ? '' : `${label} `)
  }
}

/** A counter in a Word number format (ST_NumberFormat); the decimal form for the others. */
function formatNumber(value: number, format: string): string {
  switch (format) {
    case 'lowerLetter':
      return letters(value).toLowerCase()
    case 'upperLetter':
      return letters(value)
    case 'lowerRoman':
      return roman(value).toLowerCase()
    case 'upperRoman':
      return roman(value)
    case 'decimalZero':
      return value < 10 ? `0${value}` : String(value)
    default:
      return String(value)
  }
}

/**
 * Word's letters: A…Z, then AA…ZZ, AAA… (the letter repeated, not a base-26 count); past eight
 * letters, the number (QA: a start of 999,999,999 made a label of 38 million letters per item).
 */
function letters(value: number): string {
  if (value < 1 || value > 26 * 8) return String(value)
  return String.fromCharCode(65 + ((value - 1) % 26)).repeat(Math.floor((value - 1) / 26) + 1)
}

function roman(value: number): string {
  if (value < 1 || value > 3999) return String(value)
  const marks: Array<[number, string]> = [[1000, 'M'], [900, 'CM'], [500, 'D'], [400, 'CD'], [100, 'C'], [90, 'XC'], [50, 'L'], [40, 'XL'], [10, 'X'], [9, 'IX'], [5, 'V'], [4, 'IV'], [1, 'I']]
  let out = ''
  for (const [size, mark] of marks) {
    while (value >= size) {
      out += mark
      value -= size
    }
  }
  return out
}
