import { AlternateContent, scanWord, type NamespaceOf } from './docx-names'
import { on, take, type Budget } from './docx-styles'

// Which header and footer parts Word shows, from the main document's sections (ECMA-376 Part 1,
// 17.10): each body paragraph's w:pPr/w:sectPr ends a section, the body's last w:sectPr is the final
// one. A body paragraph stands in the body itself, or in a content control or custom XML there (Word
// puts a table of contents' section break in its content control); one in a table cell or a text
// box ends no section (Word puts no section break there), so its w:sectPr is not read. A section shows its `default` header and footer; its `first` ones only when it has
// w:titlePg; the `even` ones only when the settings have w:evenAndOddHeaders. A section without a
// reference of some kind and type takes the previous section's (17.10.1, 17.10.5). A part named
// only where Word does not show it (a `first` header without w:titlePg, say) is text Word never
// shows: docx-package.ts leaves it out. Names are read by namespace (docx-names.ts scanWord), and
// mc:AlternateContent as Word reads it, the branch it shows only.

export type PageKind = 'header' | 'footer'

/** The relationships namespace, transitional and strict, which r:id is in. */
const R_NAMESPACES = new Set(['http://schemas.openxmlformats.org/officeDocument/2006/relationships', 'http://purl.oclc.org/ooxml/officeDocument/relationships'])
/** The prefixes scanWord names WordprocessingML, markup compatibility and math attributes with: never the relationships namespace. */
const CANONICAL_PREFIXES = new Set(['w', 'mc', 'm'])
const REFERENCES: Record<string, PageKind> = { 'w:headerReference': 'header', 'w:footerReference': 'footer' }
/** What holds body paragraphs where it stands in the body (scanAsShown already reads alternate content as its branch). */
const BODY_BLOCKS = new Set(['w:sdt', 'w:sdtContent', 'w:customXml'])

interface Section {
  /** Where its w:sectPr stands (its depth among the elements scanXml reports). */
  depth: number
  final: boolean
  titlePg: boolean
  /** The relationship id of each reference, by kind and type ("header first"). */
  references: Map<string, string>
}

/**
 * The parts of the headers and footers Word shows, from the main document's XML and its settings
 * part's, `pageOf` resolving a reference's relationship id to a header (footer) part. Undefined
 * when the main document is not well-formed (the document is refused then). Counts each element
 * it reads against `budget`.
 */
export function shownPages(main: string, settings: string | undefined, pageOf: (kind: PageKind, id: string) => string | undefined, budget: Budget): Set<string> | undefined {
  let evenAndOdd = false
  const readSettings = (name: string, attributes: Record<string, string>, parent: string | undefined, grand: string | undefined) => {
    if (name === 'w:evenAndOddHeaders' && parent === 'w:settings' && grand === undefined) evenAndOdd = on(attributes['w:val'])
  }
  // Settings that are not well-formed set nothing (Word would not open the document).
  if (settings !== undefined && !scanAsShown(settings, budget, readSettings)) evenAndOdd = false
  const types = (section: Section) => ['default', ...(section.titlePg ? ['first'] : []), ...(evenAndOdd ? ['even'] : [])]

  const current = new Map<string, string>()
  const shown = new Set<string>()
  const end = (section: Section) => {
    for (const [key, id] of section.references) current.set(key, id)
    for (const kind of ['header', 'footer'] as const) {
      for (const type of types(section)) {
        const id = current.get(`${kind} ${type}`)
        const part = id === undefined ? undefined : pageOf(kind, id)
        if (part !== undefined) shown.add(part)
      }
    }
  }
  let section: Section | undefined
  let final: Section | undefined
  /** By depth, whether the element open there holds body paragraphs: the body, or a block container in it. */
  const holdsBody: boolean[] = []
  const wellFormed = scanAsShown(
    main,
    budget,
    (name, attributes, parent, grand, depth, namespaceOf) => {
      holdsBody[depth] = (name === 'w:body' && parent === 'w:document') || (BODY_BLOCKS.has(name) && holdsBody[depth - 1] === true)
      const inBodyParagraph = parent === 'w:pPr' && grand === 'w:p' && holdsBody[depth - 3] === true
      const inBody = parent === 'w:body' && holdsBody[depth - 1] === true
      if (name === 'w:sectPr' && section === undefined && (inBodyParagraph || inBody)) {
        section = { depth, final: inBody, titlePg: false, references: new Map() }
      } else if (parent !== 'w:sectPr' || section?.depth !== depth - 1) return
      else if (name === 'w:titlePg') section.titlePg = on(attributes['w:val'])
      else if (REFERENCES[name] !== undefined) {
        const id = relationshipId(attributes, namespaceOf)
        // The type is required; one left out is read as the default.
        if (id !== undefined) section.references.set(`${REFERENCES[name]} ${attributes['w:type'] ?? 'default'}`, id)
      }
    },
    (name, depth) => {
      if (name !== 'w:sectPr' || section?.depth !== depth) return
      // The body's w:sectPr is the last section's whatever follows it: the last one counts.
      if (section.final) final = section
      else end(section)
      section = undefined
    },
  )
  if (!wellFormed) return undefined
  if (final) end(final)
  return shown
}

/** An element's r:id: its id attribute in the relationships namespace, under whatever prefix. */
function relationshipId(attributes: Record<string, string>, namespaceOf: NamespaceOf): string | undefined {
  for (const key in attributes) {
    // scanWord writes a canonical prefix bound elsewhere as {uri}.
    const close = key.startsWith('{') ? key.indexOf('}') : -1
    if (close > 0) {
      if (key.slice(close + 1) === 'id' && R_NAMESPACES.has(key.slice(1, close))) return attributes[key]
      continue
    }
    const colon = key.indexOf(':')
    if (colon < 0 || key.slice(colon + 1) !== 'id') continue
    const prefix = key.slice(0, colon)
    if (!CANONICAL_PREFIXES.has(prefix) && R_NAMESPACES.has(namespaceOf(prefix) ?? '')) return attributes[key]
  }
  return undefined
}

type Entry = { name: string; is: 'element' | 'alternate' | 'skipped' }

/**
 * scanWord with mc:AlternateContent read as Word reads it: the elements of a branch it does not
 * show are skipped, those of the one it shows reported as children of the AlternateContent's
 * parent. `parent` and `grand` are so read; `depth` counts the elements reported. Each element
 * read costs one of `budget`. False when the XML is not well-formed.
 */
function scanAsShown(
  xml: string,
  budget: Budget,
  onOpen: (name: string, attributes: Record<string, string>, parent: string | undefined, grand: string | undefined, depth: number, namespaceOf: NamespaceOf) => void,
  onClose: (name: string, depth: number) => void = () => {},
): boolean {
  const alternates = new AlternateContent()
  const open: Entry[] = []
  /** The open elements reported, innermost last. */
  const names: string[] = []
  return scanWord(
    xml,
    (name, attributes, _depth, _start, _qname, namespaceOf) => {
      take(budget)
      const around = open.at(-1)
      let is: Entry['is'] = 'element'
      if (around?.is === 'skipped') is = 'skipped'
      else if (name === 'mc:AlternateContent') {
        alternates.open()
        is = 'alternate'
      } else if ((name === 'mc:Choice' || name === 'mc:Fallback') && around?.name === 'mc:AlternateContent') {
        is = alternates.shows(name, attributes.Requires, namespaceOf) ? 'alternate' : 'skipped'
      }
      open.push({ name, is })
      if (is !== 'element') return
      onOpen(name, attributes, names.at(-1), names.at(-2), names.length, namespaceOf)
      names.push(name)
    },
    {
      onClose() {
        // A part that is not well-formed may report no end for some element: what is read of it is not used.
        const entry = open.pop()
        if (entry?.is === 'alternate' && entry.name === 'mc:AlternateContent') alternates.close()
        if (entry?.is !== 'element') return
        names.pop()
        onClose(entry.name, names.length)
      },
    },
  )
}
