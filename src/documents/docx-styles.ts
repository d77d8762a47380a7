import { scanXml, type XmlEvents } from './package-parts'
import { ElementCapExceeded } from './types'

// WordprocessingML read by namespace, as Word reads it, for the DOCX rewrite (docx-rewrite.ts), and
// the styles that hide text. Word shows or hides by an element's namespace, not by its prefix:
// `<v:vanish xmlns:v="…/wordprocessingml/2006/main"/>` hides as `<w:vanish/>` does.

/** WordprocessingML, transitional and strict. */
const W_NAMESPACES = new Set(['http://schemas.openxmlformats.org/wordprocessingml/2006/main', 'http://purl.oclc.org/ooxml/wordprocessingml/main'])

/** What is left of the elements the rewrite may read: past it the document is refused, as officeparser refuses it. */
export type Budget = { left: number }
export const take = (budget: Budget) => {
  if (--budget.left < 0) throw new ElementCapExceeded()
}

/** CT_OnOff: present without a value, or with any value but these, is on. */
export const on = (value: string | undefined) => value === undefined || !['0', 'false', 'off'].includes(value)

/** The namespaces in scope by prefix ('' the default one); `plain` when every name reads as written (w: is WordprocessingML or undeclared, no other prefix is). */
type Scope = { uris: Map<string, string>; plain: boolean }

/** `qname` as scanWord names it: `w:local` in WordprocessingML whatever its prefix, else as written (`{uri}local` for a w: bound elsewhere). */
function resolve(qname: string, scope: Scope): string {
  if (scope.plain) return qname
  const colon = qname.indexOf(':')
  const prefix = colon < 0 ? '' : qname.slice(0, colon)
  const uri = scope.uris.get(prefix)
  // An undeclared w: is read as WordprocessingML: officeparser reads such names by their prefix.
  if (uri === undefined) return qname
  if (W_NAMESPACES.has(uri)) return prefix === 'w' ? qname : `w:${qname.slice(colon + 1)}`
  return prefix === 'w' ? `{${uri}}${qname.slice(2)}` : qname
}

/**
 * scanXml with WordprocessingML's elements and attributes named `w:local` whatever prefix (or
 * default namespace) the XML binds it to; `qname` is the element as written. Unprefixed attributes
 * are in no namespace, as XML has it.
 */
export function scanWord(
  xml: string,
  onOpen: (name: string, attributes: Record<string, string>, depth: number, start: number, qname: string) => void,
  events: XmlEvents = {},
): boolean {
  const scopes: Scope[] = [{ uris: new Map(), plain: true }]
  return scanXml(
    xml,
    (qname, written, depth, start) => {
      scopes.length = depth + 1
      let scope = scopes[depth]!
      for (const key in written) {
        if (key !== 'xmlns' && !key.startsWith('xmlns:')) continue
        const prefix = key === 'xmlns' ? '' : key.slice(6)
        const uris = new Map(scope.uris).set(prefix, written[key]!)
        scope = { uris, plain: scope.plain && (prefix === 'w') === W_NAMESPACES.has(written[key]!) }
      }
      scopes.push(scope)
      let attributes = written
      if (!scope.plain) {
        attributes = {}
        for (const key in written) attributes[key.includes(':') && !key.startsWith('xmlns:') ? resolve(key, scope) : key] = written[key]!
      }
      onOpen(resolve(qname, scope), attributes, depth, start, qname)
    },
    {
      onText: events.onText,
      onClose: events.onClose && ((qname, start, end) => events.onClose!(resolve(qname, scopes.pop()!), start, end)),
    },
  )
}

const XMLNS = Buffer.from('xmlns')
const DECLARATION = /^xmlns(?::([^\s=/>]*))?\s*=\s*(?:"([^"<&]*)"|'([^'<&]*)')/

/**
 * Whether `part` may bind WordprocessingML to a prefix other than w: (or as the default namespace),
 * so that markers written `<w:…` would miss its elements. Conservative: a declaration it cannot read
 * plainly (an entity in the URI, a value past 512 bytes) counts.
 */
export function bindsWordElsewhere(part: Buffer): boolean {
  for (let at = part.indexOf(XMLNS); at >= 0; at = part.indexOf(XMLNS, at + 5)) {
    const declaration = DECLARATION.exec(part.toString('latin1', at, at + 512))
    if (declaration === null) {
      // Not a declaration (text, or an attribute whose name merely starts so), unless it is one cut short or with an entity.
      if (/^xmlns(?::[^\s=/>]*)?\s*=/.test(part.toString('latin1', at, at + 512))) return true
      continue
    }
    const uri = declaration[2] ?? declaration[3]!
    if (W_NAMESPACES.has(uri) && declaration[1] !== 'w') return true
  }
  return false
}

/**
 * Whether each style shows or hides its text: true hides, false shows (w:vanish in its run
 * properties, its own or the nearest in its w:basedOn chain), undefined sets neither. Every style
 * of its type is listed: a w:pStyle naming none of them is the default paragraph style's.
 */
export interface HiddenStyles {
  character: Map<string, boolean | undefined>
  paragraph: Map<string, boolean | undefined>
  /** The default paragraph style's (the last w:default one, as Word takes it). */
  defaultParagraph?: boolean
  /** The document defaults' (w:docDefaults). */
  defaults?: boolean
}

interface Style {
  type?: string
  basedOn?: string
  vanish?: boolean
}

export function readHiddenStyles(xml: string | undefined, budget: Budget = { left: Number.POSITIVE_INFINITY }): HiddenStyles {
  const hidden: HiddenStyles = { character: new Map(), paragraph: new Map() }
  if (xml === undefined) return hidden
  const styles = new Map<string, Style>()
  let style: Style | undefined
  let defaultParagraph: string | undefined
  const names: string[] = []
  scanWord(xml, (name, attributes, depth) => {
    take(budget)
    names.length = depth
    const [grand, parent] = [names[depth - 2], names[depth - 1]]
    names.push(name)
    if (name === 'w:style' && parent === 'w:styles') {
      const id = attributes['w:styleId'] ?? ''
      // A style without a type is a paragraph style.
      style = { type: attributes['w:type'] ?? 'paragraph' }
      styles.set(id, style)
      if (style.type === 'paragraph' && attributes['w:default'] !== undefined && on(attributes['w:default'])) defaultParagraph = id
    } else if (name === 'w:basedOn' && parent === 'w:style' && style) style.basedOn = attributes['w:val']
    else if (name === 'w:vanish' && parent === 'w:rPr' && grand === 'w:style' && style) style.vanish = on(attributes['w:val'])
    else if (name === 'w:vanish' && parent === 'w:rPr' && grand === 'w:rPrDefault') hidden.defaults = on(attributes['w:val'])
  })
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
      if (at.vanish !== undefined) {
        value = at.vanish
        break
      }
      key = at.basedOn
    }
    for (const walked of chain) resolved.set(walked, value)
  }
  for (const [id, { type }] of styles) {
    if (type === 'character') hidden.character.set(id, resolved.get(id))
    if (type === 'paragraph') hidden.paragraph.set(id, resolved.get(id))
  }
  if (defaultParagraph !== undefined) hidden.defaultParagraph = resolved.get(defaultParagraph)
  return hidden
}

/** Whether anything hides by style (else only a run's own w:vanish, or a placeholder, hides). */
export const anyHidden = (styles: HiddenStyles) =>
  styles.defaults === true || styles.defaultParagraph === true || [...styles.character.values(), ...styles.paragraph.values()].includes(true)

/**
 * Whether a run shows or hides its text by its styles, the nearest setting deciding: its character
 * style's chain, then its paragraph's style's (the default paragraph style's when it names none, or
 * none there is), then the document defaults. A run's own w:vanish comes before all of them.
 */
export function hiddenByStyles(styles: HiddenStyles, runStyle: string | undefined, paragraphStyle: string | undefined): boolean {
  const character = runStyle === undefined ? undefined : styles.character.get(runStyle)
  if (character !== undefined) return character
  const paragraph = paragraphStyle !== undefined && styles.paragraph.has(paragraphStyle) ? styles.paragraph.get(paragraphStyle) : styles.defaultParagraph
  return paragraph ?? styles.defaults ?? false
}
