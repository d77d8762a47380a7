import { scanWord } from './docx-names'
import { ElementCapExceeded } from './types'

// The styles that hide text (w:vanish), read by namespace as Word reads them (docx-names.ts), for the
// DOCX rewrite (docx-rewrite.ts).

/** What is left of the elements the rewrite may read: past it the document is refused, as officeparser refuses it. */
export type Budget = { left: number }
export const take = (budget: Budget) => {
  if (--budget.left < 0) throw new ElementCapExceeded()
}

/** CT_OnOff: present without a value, or with any value but these, is on. */
export const on = (value: string | undefined) => value === undefined || !['0', 'false', 'off'].includes(value)

/**
 * Whether each style shows or hides its text: true hides, false shows (w:vanish in its run
 * properties, its own or the nearest in its w:basedOn chain), undefined sets neither. Every style
 * of its type is listed: a w:pStyle naming none of them is the default paragraph style's, a
 * w:tblStyle naming none the default table style's.
 */
export interface HiddenStyles {
  character: Map<string, boolean | undefined>
  paragraph: Map<string, boolean | undefined>
  /**
   * A table style hides when a conditional format of its chain (w:tblStylePr: first row, banded
   * columns…) does, whichever that applies to: which does depends on the table's w:tblLook and on
   * where a cell stands (its last row and column known only at the table's end), and a conditional
   * w:vanish has no use but hiding. Its text shown the less, never hidden text the more.
   */
  table: Map<string, boolean | undefined>
  /** The default paragraph and table styles' (the last w:default one of the type, as Word takes it). */
  defaultParagraph?: boolean
  defaultTable?: boolean
  /** The document defaults' (w:docDefaults). */
  defaults?: boolean
}

interface Style {
  type?: string
  basedOn?: string
  vanish?: boolean
  /** Set when a conditional format (w:tblStylePr) hides. */
  conditional?: true
}

export function readHiddenStyles(xml: string | undefined, budget: Budget = { left: Number.POSITIVE_INFINITY }): HiddenStyles {
  const hidden: HiddenStyles = { character: new Map(), paragraph: new Map(), table: new Map() }
  if (xml === undefined) return hidden
  const styles = new Map<string, Style>()
  let style: Style | undefined
  const byDefault = new Map<string, string>()
  const names: string[] = []
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
    else if (name === 'w:vanish' && parent === 'w:rPr' && grand === 'w:tblStylePr' && great === 'w:style' && style && on(attributes['w:val'])) style.conditional = true
    else if (name === 'w:vanish' && parent === 'w:rPr' && grand === 'w:rPrDefault') hidden.defaults = on(attributes['w:val'])
  })
  const resolved = resolveChains(styles, style => style.vanish)
  const conditional = resolveChains(styles, style => style.conditional)
  for (const [id, { type }] of styles) {
    if (type === 'character') hidden.character.set(id, resolved.get(id))
    if (type === 'paragraph') hidden.paragraph.set(id, resolved.get(id))
    if (type === 'table') hidden.table.set(id, conditional.get(id) ?? resolved.get(id))
  }
  const paragraph = byDefault.get('paragraph')
  const table = byDefault.get('table')
  if (paragraph !== undefined) hidden.defaultParagraph = resolved.get(paragraph)
  if (table !== undefined) hidden.defaultTable = hidden.table.get(table)
  return hidden
}

/** Each style's nearest `setting` in its w:basedOn chain. */
function resolveChains(styles: Map<string, Style>, setting: (style: Style) => boolean | undefined): Map<string, boolean | undefined> {
  // Each style's chain is walked once: a style met again takes what it resolved to (a loop, undefined).
  const resolved = new Map<string, boolean | undefined>()
  for (const id of styles.keys()) {
    const chain: string[] = []
    const walking = new Set<string>()
    let key: string | undefined = id
    let value: boolean | undefined
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
  styles.defaultTable === true ||
  [...styles.character.values(), ...styles.paragraph.values(), ...styles.table.values()].includes(true)

/**
 * Whether a run shows or hides its text by its styles, the nearest setting deciding: its character
 * style's chain, then its paragraph's style's (the default paragraph style's when it names none, or
 * none there is), then, in a table, the table's style's (likewise), then the document defaults
 * (ECMA-376 17.7.2). A run's own w:vanish comes before all of them. `table` is undefined outside a
 * table, and '' for a table naming no style.
 */
export function hiddenByStyles(styles: HiddenStyles, runStyle: string | undefined, paragraphStyle: string | undefined, table?: string): boolean {
  const character = runStyle === undefined ? undefined : styles.character.get(runStyle)
  if (character !== undefined) return character
  const paragraph = paragraphStyle !== undefined && styles.paragraph.has(paragraphStyle) ? styles.paragraph.get(paragraphStyle) : styles.defaultParagraph
  if (paragraph !== undefined) return paragraph
  const tabled = table === undefined ? undefined : styles.table.has(table) ? styles.table.get(table) : styles.defaultTable
  return tabled ?? styles.defaults ?? false
}
