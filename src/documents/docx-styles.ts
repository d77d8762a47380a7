import { scanWord } from './docx-names'
import { ElementCapExceeded } from './types'

// The styles that hide text (w:vanish), read by namespace as Word reads them (docx-names.ts), for the
// DOCX rewrite (docx-rewrite.ts). w:vanish is a toggle property (ECMA-376 Part 1, 17.7.3): a run's
// own setting is absolute, but a style's turns over what the levels below it gave. The levels are
// the table style, the paragraph style and the character style, each read through its w:basedOn
// chain (where the nearest setting decides: a derived style's w:val="0" shows what its base hid),
// over the document defaults: each level whose setting differs from the defaults' turns the text
// over once, so a paragraph style and a character style that both hide show, and a level set as
// the defaults are changes nothing. (The spec's prose allows readings that differ within a chain;
// this is Word's, as measured by others and as its own style dialog writes a derived style.)

/** What is left of the elements the rewrite may read: past it the document is refused, as officeparser refuses it. */
export type Budget = { left: number }
export const take = (budget: Budget) => {
  if (--budget.left < 0) throw new ElementCapExceeded()
}

/** CT_OnOff: present without a value, or with any value but these, is on. */
export const on = (value: string | undefined) => value === undefined || !['0', 'false', 'off'].includes(value)

/**
 * Each style's setting: true hides, false shows (w:vanish in its run properties, its own or the
 * nearest in its w:basedOn chain), undefined sets neither. Every style of its type is listed: a
 * w:pStyle naming none of them is the default paragraph style's, a w:tblStyle naming none the
 * default table style's.
 */
export interface HiddenStyles {
  character: Map<string, boolean | undefined>
  paragraph: Map<string, boolean | undefined>
  table: Map<string, TableSetting>
  /** The default paragraph and table styles' (the last w:default one of the type, as Word takes it). */
  defaultParagraph?: boolean
  defaultTable?: TableSetting
  /** The document defaults' (w:docDefaults). */
  defaults?: boolean
}

/**
 * A table style's setting, and its conditional formats' (w:tblStylePr: first row, banded
 * columns…, by their w:type), each the nearest its chain sets, with the rows and columns a band
 * holds; which apply to a cell is docx-table-styles.ts's to say.
 */
export interface TableSetting {
  value: boolean | undefined
  conditions: Map<string, boolean>
  rowBand?: number
  columnBand?: number
}

/** The conditional formats of a table style (ST_TblStyleOverrideType), in the order Office applies them, a later one over an earlier. */
export const CONDITIONS = ['wholeTable', 'band1Horz', 'band2Horz', 'band1Vert', 'band2Vert', 'firstCol', 'lastCol', 'firstRow', 'lastRow', 'nwCell', 'neCell', 'swCell', 'seCell']

interface Style {
  type?: string
  basedOn?: string
  vanish?: boolean
  /** What each conditional format (w:tblStylePr) sets. */
  conditions?: Map<string, boolean>
  rowBand?: number
  columnBand?: number
}

/** A band's size as written (ST_DecimalNumber): a positive whole number, else undefined. */
export const bandSize = (value: string | undefined) => (value !== undefined && /^\d{1,5}$/.test(value) && Number(value) > 0 ? Number(value) : undefined)

export function readHiddenStyles(xml: string | undefined, budget: Budget = { left: Number.POSITIVE_INFINITY }): HiddenStyles {
  const hidden: HiddenStyles = { character: new Map(), paragraph: new Map(), table: new Map() }
  if (xml === undefined) return hidden
  const styles = new Map<string, Style>()
  let style: Style | undefined
  const byDefault = new Map<string, string>()
  const names: string[] = []
  let condition = ''
  scanWord(xml, (name, attributes, depth) => {
    take(budget)
    names.length = depth
    const [great, grand, parent] = [names[depth - 3], names[depth - 2], names[depth - 1]]
    names.push(name)
    if (name === 'w:style' && parent === 'w:styles') {
      const id = attributes['w:styleId'] ?? ''
      // A style without a type is a paragraph style.
      style = { type: attributes['w:type'] ?? 'paragraph' }
      styles.set(id, style)
      if (attributes['w:default'] !== undefined && on(attributes['w:default'])) byDefault.set(style.type!, id)
    } else if (name === 'w:basedOn' && parent === 'w:style' && style) style.basedOn = attributes['w:val']
    else if (name === 'w:vanish' && parent === 'w:rPr' && grand === 'w:style' && style) style.vanish = on(attributes['w:val'])
    else if (name === 'w:tblStylePr' && parent === 'w:style') condition = attributes['w:type'] ?? ''
    else if (name === 'w:vanish' && parent === 'w:rPr' && grand === 'w:tblStylePr' && great === 'w:style' && style && CONDITIONS.includes(condition)) (style.conditions ??= new Map()).set(condition, on(attributes['w:val']))
    else if (name === 'w:tblStyleRowBandSize' && parent === 'w:tblPr' && grand === 'w:style' && style) style.rowBand = bandSize(attributes['w:val'])
    else if (name === 'w:tblStyleColBandSize' && parent === 'w:tblPr' && grand === 'w:style' && style) style.columnBand = bandSize(attributes['w:val'])
    else if (name === 'w:vanish' && parent === 'w:rPr' && grand === 'w:rPrDefault') hidden.defaults = on(attributes['w:val'])
  })
  const resolved = resolveChains(styles, style => style.vanish)
  const tables = new Map([...styles].filter(([, { type }]) => type === 'table'))
  const conditions = CONDITIONS.map(type => [type, resolveChains(tables, style => style.conditions?.get(type))] as const)
  const [rowBands, columnBands] = [resolveChains(tables, style => style.rowBand), resolveChains(tables, style => style.columnBand)]
  for (const [id, { type }] of styles) {
    if (type === 'character') hidden.character.set(id, resolved.get(id))
    if (type === 'paragraph') hidden.paragraph.set(id, resolved.get(id))
  }
  for (const id of tables.keys()) {
    const set = new Map(conditions.flatMap(([type, values]) => (values.get(id) === undefined ? [] : [[type, values.get(id)!] as const])))
    hidden.table.set(id, { value: resolved.get(id), conditions: set, rowBand: rowBands.get(id), columnBand: columnBands.get(id) })
  }
  const paragraph = byDefault.get('paragraph')
  const table = byDefault.get('table')
  if (paragraph !== undefined) hidden.defaultParagraph = resolved.get(paragraph)
  if (table !== undefined) hidden.defaultTable = hidden.table.get(table)
  return hidden
}

/** Each style's nearest `setting` in its w:basedOn chain. */
export function resolveChains<S extends { basedOn?: string }, T>(styles: Map<string, S>, setting: (style: S) => T | undefined): Map<string, T | undefined> {
  // Each style's chain is walked once: a style met again takes what it resolved to (a loop, undefined).
  const resolved = new Map<string, T | undefined>()
  for (const id of styles.keys()) {
    const chain: string[] = []
    const walking = new Set<string>()
    let key: string | undefined = id
    let value: T | undefined
    while (key !== undefined && !walking.has(key)) {
      if (resolved.has(key)) {
        value = resolved.get(key)
        break
      }
      const at = styles.get(key)
      if (at === undefined) break
      chain.push(key)
      walking.add(key)
      if (setting(at) !== undefined) {
        value = setting(at)
        break
      }
      key = at.basedOn
    }
    for (const walked of chain) resolved.set(walked, value)
  }
  return resolved
}

/** Whether anything hides by style (else only a run's own w:vanish, or a placeholder, hides). */
export const anyHidden = (styles: HiddenStyles) =>
  styles.defaults === true ||
  styles.defaultParagraph === true ||
  [...styles.character.values(), ...styles.paragraph.values()].includes(true) ||
  [...styles.table.values(), ...(styles.defaultTable ? [styles.defaultTable] : [])].some(({ value, conditions }) => value === true || [...conditions.values()].includes(true))

/**
 * Whether a run hides its text by its styles: the document defaults' setting, turned over by each
 * level set otherwise (ECMA-376 17.7.3): in a table, the table's style, as it stands for the run's
 * cell (docx-table-styles.ts tableHidden: undefined outside a table), then its paragraph's style
 * (the default paragraph style's when it names none, or none there is), then its character style.
 * A run's own w:vanish, absolute, comes before all of them.
 */
export function hiddenByStyles(styles: HiddenStyles, runStyle: string | undefined, paragraphStyle: string | undefined, table?: boolean): boolean {
  const base = styles.defaults ?? false
  const paragraph = paragraphStyle !== undefined && styles.paragraph.has(paragraphStyle) ? styles.paragraph.get(paragraphStyle) : styles.defaultParagraph
  const character = runStyle === undefined ? undefined : styles.character.get(runStyle)
  return [table, paragraph, character].reduce<boolean>((state, level) => (level === undefined || level === base ? state : !state), base)
}
