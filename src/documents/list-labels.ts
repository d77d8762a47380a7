import type { PackageParts } from './package-parts'
import { on, resolveChains } from './docx-styles'
import { scanXml } from './xml-scan'

// A Word list item's label, as Word shows it before the item: "1.", "a)", "2.1", or a bullet.
// officeparser gives each item its list (`listId`, the numbering instance w:numId), its level
// (`indentation`, w:ilvl) and whether it is ordered, but not its label: contracts and policies
// lost their clause numbers ("as stated in clause 2" pointed nowhere). The formats come from
// word/numbering.xml (each level's start, number format and label text, `%1.%2`); the counting
// follows the items in reading order, table cells' among them, a deeper level restarting under
// each new item above it. A paragraph numbered by its style (w:numPr in a paragraph style of
// styles.xml, as LibreOffice and Word number headings "1.", "1.1") is an item too, though
// officeparser reads it as a plain paragraph or heading: only its style's name comes with it.
// So is a paragraph naming no style (or one styles.xml lacks) when the default paragraph style
// numbers: Word then numbers every such paragraph.

interface Level {
  start: number
  format: string
  text: string
  /** "Legal numbering" (w:isLgl): every level's number written in digits. */
  legal: boolean
  /** The paragraph style this level belongs to (w:pStyle): a paragraph numbered by that style is at this level. */
  style?: string
}

/** A numbering instance (w:num): its list definition (w:abstractNum, whose counters it shares) and its own levels. */
interface Instance {
  abstractId: string
  levels: Array<Level | undefined>
  /** Levels whose start the instance overrides: they count afresh when the instance is first used. */
  restarts: number[]
}

/** The longest label text read (Word's are a few characters; a longer one is a hostile file's, and each item would repeat it). */
const MAX_LABEL_TEXT = 64
/** Word's levels: 0 to 8. */
const LEVELS = 9
/** Word's largest start value; a larger one (a hostile file's) is taken as 1. */
const MAX_START = 32767
const number = (value: string | undefined, fallback: number) => (value !== undefined && /^\d{1,5}$/.test(value) && Number(value) <= MAX_START ? Number(value) : fallback)
const levelIndex = (value: string | undefined) => {
  const at = number(value, -1)
  return at < LEVELS ? at : -1
}

/**
 * The numbering instances (w:numId) of word/numbering.xml; empty without one. An instance's
 * levels are its list definition's (followed once through a list style's w:numStyleLink), with
 * its w:lvlOverride's start or whole level in their place.
 */
export function readNumbering(parts: PackageParts): Map<string, Instance> {
  const xml = parts.text('word/numbering.xml')
  const instances = new Map<string, Instance>()
  if (xml === undefined) return instances
  const abstract = new Map<string, { levels: Array<Level | undefined>; styleLink?: string; numStyleLink?: string }>()
  const numbered: Array<{ id: string; abstractId: string; starts: Map<number, number>; levels: Map<number, Level> }> = []
  let definition: { levels: Array<Level | undefined>; styleLink?: string; numStyleLink?: string } | undefined
  let num: (typeof numbered)[number] | undefined
  let override = -1
  let level: Level | undefined
  scanXml(xml, (name, attributes) => {
    const value = attributes['w:val']
    if (name === 'w:abstractNum') {
      abstract.set(attributes['w:abstractNumId'] ?? '', (definition = { levels: [] }))
      num = undefined
    } else if (name === 'w:num') {
      numbered.push((num = { id: attributes['w:numId'] ?? '', abstractId: '', starts: new Map(), levels: new Map() }))
      definition = undefined
    } else if (name === 'w:styleLink' && definition) definition.styleLink = value
    else if (name === 'w:numStyleLink' && definition) definition.numStyleLink = value
    else if (name === 'w:abstractNumId' && num) num.abstractId = value ?? ''
    else if (name === 'w:lvlOverride') override = levelIndex(attributes['w:ilvl'])
    else if (name === 'w:startOverride' && num && override >= 0) num.starts.set(override, number(value, 1))
    else if (name === 'w:lvl') {
      const at = levelIndex(attributes['w:ilvl'])
      level = { start: 1, format: 'decimal', text: `%${at + 1}.`, legal: false }
      if (at < 0) level = undefined
      else if (num && override >= 0) num.levels.set(override, level)
      else if (definition) definition.levels[at] = level
    } else if (name === 'w:start' && level) level.start = number(value, 1)
    else if (name === 'w:numFmt' && level) level.format = value ?? 'decimal'
    else if (name === 'w:lvlText' && level && (value ?? '').length <= MAX_LABEL_TEXT) level.text = value ?? ''
    else if (name === 'w:isLgl' && level) level.legal = value === undefined || value === '1' || value === 'true' || value === 'on'
    else if (name === 'w:pStyle' && level) level.style = value
  })
  const byStyle = new Map([...abstract.entries()].filter(([, each]) => each.styleLink !== undefined).map(([id, each]) => [each.styleLink!, id]))
  for (const { id, abstractId, starts, levels } of numbered) {
    // A list made from a list style names the style; the style's definition holds the levels (one hop: no loops).
    const linked = abstract.get(abstractId)?.numStyleLink
    const definitionId = linked !== undefined && byStyle.has(linked) ? byStyle.get(linked)! : abstractId
    const base = abstract.get(definitionId)?.levels ?? []
    const own = Array.from({ length: LEVELS }, (_, at) => levels.get(at) ?? (base[at] && starts.has(at) ? { ...base[at]!, start: starts.get(at)! } : base[at]))
    instances.set(id, { abstractId: definitionId, levels: own, restarts: [...new Set([...starts.keys(), ...levels.keys()])] })
  }
  return instances
}

/** A paragraph style's numbering: its w:numPr's numId (with the style setting it) and level, each the nearest its w:basedOn chain sets. */
interface StyleNumbering {
  numId: string
  definedBy: string
  level?: number
}

/** The paragraph styles' numbering, by style id (only those that number), and which styles there are. */
export interface StyleNumberings {
  numbered: Map<string, StyleNumbering>
  /** Every paragraph style's id: a paragraph naming another is the default style's, as Word reads it. */
  known: Set<string>
  /** The default paragraph style (the last w:default one, as Word takes it). */
  defaultStyle?: string
}

/**
 * The numbering of the paragraph styles in the document's styles part (the one its main part
 * names, as Word finds it), by style id: only those that number, their w:basedOn chains followed.
 */
export function readStyleNumbering(parts: PackageParts): StyleNumberings {
  const main = parts.main()
  const named = main === undefined ? undefined : [...(parts.relationships(main)?.values() ?? [])].find(({ type }) => type.endsWith('/styles'))?.path
  const xml = parts.text(named ?? 'word/styles.xml')
  const found: StyleNumberings = { numbered: new Map(), known: new Set() }
  if (xml === undefined) return found
  const styles = new Map<string, { id: string; basedOn?: string; numId?: string; level?: number }>()
  let style: { id: string; basedOn?: string; numId?: string; level?: number } | undefined
  const names: string[] = []
  scanXml(xml, (name, attributes, depth) => {
    names.length = depth
    const [great, grand, parent] = [names[depth - 3], names[depth - 2], names[depth - 1]]
    names.push(name)
    const value = attributes['w:val']
    const inNumPr = parent === 'w:numPr' && grand === 'w:pPr' && great === 'w:style'
    if (name === 'w:style' && parent === 'w:styles') {
      const id = attributes['w:styleId'] ?? ''
      // A style without a type is a paragraph style.
      style = (attributes['w:type'] ?? 'paragraph') === 'paragraph' ? { id } : undefined
      if (style) styles.set(id, style)
      if (style && attributes['w:default'] !== undefined && on(attributes['w:default'])) found.defaultStyle = id
    } else if (name === 'w:basedOn' && parent === 'w:style' && style) style.basedOn = value
    else if (name === 'w:numId' && inNumPr && style) style.numId = value ?? ''
    else if (name === 'w:ilvl' && inNumPr && style && levelIndex(value) >= 0) style.level = levelIndex(value)
  })
  const numIds = resolveChains(styles, ({ id, numId }) => (numId === undefined ? undefined : { numId, definedBy: id }))
  const levels = resolveChains(styles, ({ level }) => level)
  for (const [id, numbering] of numIds) if (numbering !== undefined) found.numbered.set(id, { ...numbering, level: levels.get(id) })
  found.known = new Set(styles.keys())
  return found
}

/** A paragraph as officeparser gives it: a `list` node for one with its own w:numPr, its style's id in `metadata.style`. */
type Block = { type: string; metadata?: Record<string, unknown> }

/**
 * The names the DOCX rewrite (docx-rewrite.ts) writes for this reading and the layout: random per
 * extraction, so a document cannot write one itself. A fixed name was a document's to use: its own
 * bookmark of that name made a paragraph Word shows vanish from the text (a clause a model
 * summarising the document never saw), and its own numId of that name numbered a paragraph by its
 * style. Leaving such names out of the document's bytes would not hold: officeparser reads
 * attribute values with character references decoded (`&#45;svc-…`).
 */
export interface RewriteMarkers {
  /** The bookmark name given a paragraph Word shows nothing of, its mark hidden too (officeparser lists it in the paragraph's `metadata.anchorIds`). */
  hiddenParagraph: string
  /**
   * The w:numId given a paragraph's own w:numPr that sets a level but no instance: Word numbers it
   * at that level of its paragraph style's list (the default style's when it names none).
   */
  styleNumbering: string
}

/** Fresh markers, for one extraction. */
export function rewriteMarkers(): RewriteMarkers {
  const id = crypto.randomUUID()
  return { hiddenParagraph: `-svc-hidden-paragraph-${id}`, styleNumbering: `-svc-style-numbering-${id}` }
}

/**
 * Whether officeparser read `block` from a w:p of the document (its paragraph reader sets both
 * keys, `style` undefined when the paragraph names none), not one it made itself: a plain-text
 * chunk's line, an HTML or RTF chunk's paragraph, which no paragraph style of the document numbers.
 */
const wordParagraph = (block: Block) =>
  (block.type === 'paragraph' || block.type === 'heading') && block.metadata !== undefined && Object.hasOwn(block.metadata, 'style') && Object.hasOwn(block.metadata, 'paragraphIndentation')

/**
 * The labels of a document's list items, counted in reading order. Counters belong to a list
 * definition, so instances sharing one continue each other (LibreOffice writes a list restarted
 * at 7 as an instance overriding the start, then its next items under the plain one); an
 * instance overriding a level's start restarts that count the first time it is used.
 */
export class ListLabels {
  private readonly counters = new Map<string, number[]>()
  private readonly used = new Set<string>()

  constructor(
    private readonly numbering: Map<string, Instance>,
    private readonly styles: StyleNumberings = { numbered: new Map(), known: new Set() },
    private readonly markers: RewriteMarkers = rewriteMarkers(),
  ) {}

  /** Whether Word shows nothing of `block`, which the rewrite marked so: not even a line (its list counts it, though: label). */
  hidden(block: Block): boolean {
    const anchors = block.metadata?.anchorIds
    return Array.isArray(anchors) && anchors.includes(this.markers.hiddenParagraph)
  }

  /**
   * The label of a paragraph, with a space, indented two spaces a level: a list item's (its own
   * w:numPr, which officeparser reads), or a paragraph's its named style numbers. Only the indent
   * for a list item whose numbering is none (w:numId 0, or one the document does not define: Word
   * shows no label); "" for a paragraph not numbered, a style's numbering turned off by the
   * paragraph's own numId 0 among them (a list node). A paragraph of the document naming no
   * paragraph style, or one the styles part lacks, is the default style's, numbered when it is
   * (as Word numbers every such paragraph); a paragraph officeparser made itself (wordParagraph) is not.
   */
  label(block: Block): string {
    const label = this.counted(block)
    // A paragraph Word shows nothing of, its mark hidden too, shows no label (Word formats a label as
    // its paragraph's mark), but is counted: Word's own Set Numbering Value continues or advances a
    // list by writing hidden numbered paragraphs before the item (ONLYOFFICE DocumentServer issue
    // 3228), which only works if they count.
    return this.hidden(block) ? '' : label
  }

  /** The label `block` would show, its list's counters advanced. */
  private counted(block: Block): string {
    const metadata = block.metadata
    const level = Number(metadata?.indentation ?? 0) | 0
    const listId = String(metadata?.listId ?? '')
    if (block.type === 'list' && listId !== this.markers.styleNumbering) return this.itemLabel(listId, level)
    const named = typeof metadata?.style === 'string' ? metadata.style : undefined
    const style = named !== undefined && this.styles.known.has(named) ? named : block.type === 'list' || wordParagraph(block) ? this.styles.defaultStyle : undefined
    const numbered = style === undefined ? undefined : this.styles.numbered.get(style)
    // numId 0 is Word's "no numbering": a derived style turns its base's off with it.
    if (style === undefined || numbered === undefined || numbered.numId === '0') return ''
    // Its own level in its style's list.
    if (block.type === 'list') return this.numbering.has(numbered.numId) ? this.itemLabel(numbered.numId, level) : ''
    const instance = this.numbering.get(numbered.numId)
    // A level naming the style (w:pStyle) is the style's level, whatever its w:ilvl says (ECMA-376 17.9.23).
    const linked = instance?.levels.findIndex(level => level?.style === style || level?.style === numbered.definedBy) ?? -1
    return instance === undefined ? '' : this.itemLabel(numbered.numId, linked >= 0 ? linked : (numbered.level ?? 0))
  }

  private itemLabel(instanceId: string, ilvl: number): string {
    const depth = Math.min(Math.max(ilvl, 0), LEVELS - 1)
    const instance = this.numbering.get(instanceId)
    const indent = '  '.repeat(depth)
    if (instance === undefined) return indent
    const counts = this.counters.get(instance.abstractId) ?? []
    this.counters.set(instance.abstractId, counts)
    if (!this.used.has(instanceId)) {
      this.used.add(instanceId)
      for (const at of instance.restarts) if (at < counts.length) counts.length = at
    }
    const level = instance.levels[depth]
    counts[depth] = (counts[depth] ?? (level?.start ?? 1) - 1) + 1
    counts.length = depth + 1 // deeper levels restart under this item
    if (level === undefined || level.format === 'none') return indent
    if (level.format === 'bullet') return `${indent}- `
    const label = level.text.replace(/%([1-9])/g, (_, n: string) => {
      const at = Number(n) - 1
      return formatNumber(counts[at] ?? instance.levels[at]?.start ?? 1, level.legal ? 'decimal' : (instance.levels[at]?.format ?? 'decimal'))
    })
    return label === '' ? indent : `${indent}${label} `
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
