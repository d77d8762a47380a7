import { scanXml, type XmlEvents } from './xml-scan'

// Word reads an element by its namespace; officeparser (xmldom's nodeName) by its name as written:
// `w:t`, `m:t`, `mc:AlternateContent`, and unprefixed names too (`t`, `AlternateContent`: its lookups
// fall back to the local name). scanWord names elements as Word reads them, so the DOCX rewrite
// (docx-rewrite.ts) can both find what Word shows and remove what only officeparser would read, and
// write what it puts in an element's place under the name officeparser reads (wordWriter).

/** WordprocessingML, transitional and strict. */
export const WML = 'http://schemas.openxmlformats.org/wordprocessingml/2006/main'
const W_NAMESPACES = [WML, 'http://purl.oclc.org/ooxml/wordprocessingml/main']
const MC = 'http://schemas.openxmlformats.org/markup-compatibility/2006'
const M_NAMESPACES = ['http://schemas.openxmlformats.org/officeDocument/2006/math', 'http://purl.oclc.org/ooxml/officeDocument/math']

/** The prefix scanWord names each namespace's elements with, whatever they are written with: those officeparser matches literally. */
const CANONICAL = new Map<string, string>([...W_NAMESPACES.map(uri => [uri, 'w'] as const), [MC, 'mc'], ...M_NAMESPACES.map(uri => [uri, 'm'] as const)])
const CANONICAL_PREFIXES = new Set(CANONICAL.values())

/** Whether binding `prefix` to `uri` leaves every name reading as written (a known namespace under its own prefix, another under another). */
const plain = (prefix: string, uri: string) => {
  const canonical = CANONICAL.get(uri)
  return canonical === undefined ? !CANONICAL_PREFIXES.has(prefix) : canonical === prefix
}

/** Whether `uri` is WordprocessingML's. */
export const isWordNamespace = (uri: string | undefined) => uri !== undefined && CANONICAL.get(uri) === 'w'

/** The namespace a prefix ('' the default one) is bound to where an element stands (at its end, where its parent does). */
export type NamespaceOf = (prefix: string) => string | undefined

/**
 * How to write a WordprocessingML element where an element ends: as w:, the one prefix officeparser
 * reads it by, bound there (the replaced element may have declared the prefix it was written with).
 */
export function wordWriter(namespaceOf: NamespaceOf) {
  const declaration = isWordNamespace(namespaceOf('w')) ? '' : ` xmlns:w="${WML}"`
  return (local: string, content?: string, more = '') =>
    content === undefined ? `<w:${local}${declaration}${more}/>` : `<w:${local}${declaration}${more}>${content}</w:${local}>`
}

/** Where the start tag at `start` ends (after its '>', which an attribute's value may hold too). */
export function startTagEnd(xml: string, start: number): number {
  let quote = ''
  for (let at = start; at < xml.length; at++) {
    const char = xml[at]
    if (quote !== '') {
      if (char === quote) quote = ''
    } else if (char === '"' || char === "'") quote = char
    else if (char === '>') return at + 1
  }
  return xml.length
}

/**
 * scanXml with elements and attributes in WordprocessingML, markup compatibility and math named
 * `w:local`, `mc:local`, `m:local` whatever prefix (or default namespace) the XML binds them to,
 * and one of those prefixes bound elsewhere named `{uri}local`; other names as written (an
 * unprefixed name outside those namespaces reads as written: no namespace officeparser knows).
 * `qname` is the element as written. Unprefixed attributes are in no namespace, as XML has it.
 * Linear in the declarations: each prefix keeps a stack of its bindings, undone at its element's end.
 */
export function scanWord(
  xml: string,
  onOpen: (name: string, attributes: Record<string, string>, depth: number, start: number, qname: string, namespaceOf: NamespaceOf) => void,
  events: XmlEvents = {},
): boolean {
  const bound = new Map<string, string[]>()
  /** Each open element's start and the prefixes it declared. */
  const frames: Array<{ start: number; declared?: string[] }> = []
  /** The bindings in scope (shadowed ones too) that make some name read otherwise than written. */
  let odd = 0
  const namespaceOf: NamespaceOf = prefix => bound.get(prefix)?.at(-1)
  const undo = ({ declared }: { declared?: string[] }) => {
    for (const prefix of declared ?? []) {
      const uris = bound.get(prefix)!
      if (!plain(prefix, uris.pop()!)) odd--
      if (uris.length === 0) bound.delete(prefix)
    }
  }
  const resolve = (qname: string) => {
    if (odd === 0) return qname
    const colon = qname.indexOf(':')
    const prefix = colon < 0 ? '' : qname.slice(0, colon)
    const uri = namespaceOf(prefix)
    // An undeclared prefix xmldom refuses; an unprefixed name without a default namespace is in none.
    if (uri === undefined) return qname
    const canonical = CANONICAL.get(uri)
    const local = qname.slice(colon + 1)
    if (canonical !== undefined) return canonical === prefix ? qname : `${canonical}:${local}`
    return CANONICAL_PREFIXES.has(prefix) ? `{${uri}}${local}` : qname
  }
  return scanXml(
    xml,
    (qname, written, depth, start) => {
      // Elements a malformed part left open (scanXml reports no end for them).
      while (frames.length > depth) undo(frames.pop()!)
      const frame: { start: number; declared?: string[] } = { start }
      for (const key in written) {
        if (key !== 'xmlns' && !key.startsWith('xmlns:')) continue
        const prefix = key === 'xmlns' ? '' : key.slice(6)
        const uri = written[key]!
        const uris = bound.get(prefix)
        if (uris) uris.push(uri)
        else bound.set(prefix, [uri])
        ;(frame.declared ??= []).push(prefix)
        if (!plain(prefix, uri)) odd++
      }
      frames.push(frame)
      let attributes = written
      if (odd > 0) {
        attributes = {}
        for (const key in written) attributes[key.includes(':') && !key.startsWith('xmlns:') ? resolve(key) : key] = written[key]!
      }
      onOpen(resolve(qname), attributes, depth, start, qname, namespaceOf)
    },
    {
      onText: events.onText,
      onClose(qname, start, end) {
        while (frames.length > 0 && frames.at(-1)!.start > start) undo(frames.pop()!)
        const name = resolve(qname)
        if (frames.at(-1)?.start === start) undo(frames.pop()!)
        events.onClose?.(name, start, end)
      },
    },
  )
}

const XMLNS = Buffer.from('xmlns')
const DECLARATION = /^xmlns(?::([^\s=/>]*))?\s*=\s*(?:"([^"<&]*)"|'([^'<&]*)')/
/** A start tag of an unprefixed element (conservative: one in a comment or CDATA counts too). */
const UNPREFIXED = /<[^\s/>:!?][^\s/>:]*[\s/>]/

/**
 * Whether scanWord may name some element of `part` otherwise than it is written, or the part has
 * unprefixed elements: markers written `<w:…` would miss the first, and officeparser reads the
 * second. Conservative: a declaration it cannot read plainly (an entity in the URI, a value past
 * 512 bytes) counts.
 */
export function namesReadOtherwise(part: Buffer): boolean {
  for (let at = part.indexOf(XMLNS); at >= 0; at = part.indexOf(XMLNS, at + 5)) {
    const declaration = DECLARATION.exec(part.toString('latin1', at, at + 512))
    if (declaration === null) {
      // Not a declaration (text, or an attribute whose name merely starts so), unless it is one cut short or with an entity.
      if (/^xmlns(?::[^\s=/>]*)?\s*=/.test(part.toString('latin1', at, at + 512))) return true
      continue
    }
    if (!plain(declaration[1] ?? '', declaration[2] ?? declaration[3]!)) return true
  }
  return UNPREFIXED.test(part.toString('latin1'))
}

/**
 * Word's choice among the branches of each open mc:AlternateContent: the first Choice whose
 * required namespaces (prefixes, bound where the Choice stands) it understands, else the Fallback.
 */
export class AlternateContent {
  /** Whether each open one has had its branch chosen. */
  private readonly chosen: boolean[] = []

  open(): void {
    this.chosen.push(false)
  }

  close(): void {
    this.chosen.pop()
  }

  /** Whether Word shows this branch (an mc:Choice or mc:Fallback child of the innermost open one). */
  shows(name: string, requires: string | undefined, namespaceOf: NamespaceOf): boolean {
    if (this.chosen.length === 0 || this.chosen.at(-1)) return false
    const understood = (requires ?? '').split(/\s+/).every(prefix => prefix === '' || WORD_UNDERSTANDS.has(namespaceOf(prefix) ?? ''))
    if (name !== 'mc:Fallback' && !understood) return false
    this.chosen[this.chosen.length - 1] = true
    return true
  }
}

/**
 * The namespaces Word understands, for mc:AlternateContent: a Choice requiring only these is what
 * it shows. An explicit list (not a family of URIs): a Choice requiring a made-up namespace is one
 * Word skips for the Fallback.
 */
const WORD_UNDERSTANDS = new Set([
  ...W_NAMESPACES,
  MC,
  ...M_NAMESPACES,
  'http://schemas.microsoft.com/office/word/2006/wordml', // wne
  'http://schemas.microsoft.com/office/word/2010/wordml', // w14
  'http://schemas.microsoft.com/office/word/2012/wordml', // w15
  'http://schemas.microsoft.com/office/word/2015/wordml/symex', // w16se
  'http://schemas.microsoft.com/office/word/2016/wordml/cid', // w16cid
  'http://schemas.microsoft.com/office/word/2018/wordml', // w16
  'http://schemas.microsoft.com/office/word/2018/wordml/cex', // w16cex
  'http://schemas.microsoft.com/office/word/2020/wordml/sdtdatahash', // w16sdtdh
  'http://schemas.microsoft.com/office/word/2023/wordml/word16du', // w16du
  'http://schemas.microsoft.com/office/word/2024/wordml/sdtformatlock', // w16sdtfl
  'http://schemas.microsoft.com/office/word/2010/wordprocessingShape', // wps
  'http://schemas.microsoft.com/office/word/2010/wordprocessingGroup', // wpg
  'http://schemas.microsoft.com/office/word/2010/wordprocessingCanvas', // wpc
  'http://schemas.microsoft.com/office/word/2010/wordprocessingInk', // wpi
  'http://schemas.microsoft.com/office/word/2010/wordprocessingDrawing', // wp14
  'http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing', // wp
  'http://schemas.openxmlformats.org/drawingml/2006/main', // a
  'http://schemas.microsoft.com/office/drawing/2010/main', // a14
  'http://schemas.openxmlformats.org/drawingml/2006/picture', // pic
  'http://schemas.openxmlformats.org/drawingml/2006/chart', // c
  'http://schemas.microsoft.com/office/drawing/2014/chartex', // cx
  'http://schemas.openxmlformats.org/drawingml/2006/diagram', // dgm
  'http://schemas.microsoft.com/office/drawing/2016/ink', // aink
  'http://schemas.microsoft.com/office/drawing/2017/model3d', // am3d
  'http://schemas.openxmlformats.org/officeDocument/2006/relationships', // r
  'urn:schemas-microsoft-com:vml', // v
  'urn:schemas-microsoft-com:office:office', // o
  'urn:schemas-microsoft-com:office:word', // w10
])
