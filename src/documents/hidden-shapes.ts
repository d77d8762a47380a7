import { cutText } from '../lib/characters'
import { scanWord, type NamespaceOf } from './docx-names'
import { take, type Budget } from './docx-styles'
import { PackageParts, rewrittenParts } from './package-parts'
import { DocumentRefused } from './types'
import { readSmallEntry, replaceEntries, type ZipEntry, type ZipLimits } from './zip-guard'

// A shape PowerPoint does not show (hidden in its Selection pane: `hidden="1"` on the shape's
// non-visual properties, p:cNvPr) is not read: officeparser 8.1.1's PowerPointParser reads every
// shape's text whatever its cNvPr says, and hidden text is a prompt-injection vector, as a DOCX's
// hidden text is (docx-package.ts). So before officeparser reads the package, each slide and notes
// part it reads is written again without its hidden shapes: a hidden group with every shape in it,
// a hidden graphic frame with its table, diagram or chart (chart-parts.ts reads the charts
// officeparser's frames name, so a hidden frame's chart is not read either).
//
// A shape is one by its namespace (PresentationML under any prefix, as PowerPoint reads it) or by
// the name officeparser matches literally (`p:sp`), so one it would read is never let through
// (docx-names.ts scanWord tells the namespace a prefix is bound to where an element stands). Which
// cNvPr is a shape's own (shapeOwning) is the rule a Word drawing's shapes are hidden by too
// (docx-drawings.ts).
// Nothing is written but what the part held, less the hidden shapes: the part is scanned as
// latin1, each character one byte, so the byte ranges cut are exactly the shapes', and the UTF-8
// around them is copied as it was (the package only shrinks).

/** officeparser's pattern for the slide and notes parts it reads (unanchored, as there). */
const SHAPES_PART = /ppt\/(notesSlides|slides)\/(notesSlide|slide)\d+.xml/
const PRESENTATION_NAMESPACES = new Set(['http://schemas.openxmlformats.org/presentationml/2006/main', 'http://purl.oclc.org/ooxml/presentationml/main'])
/** Each kind of shape, by the element holding its non-visual properties (its p:cNvPr's parent). */
const SHAPES: ShapeKinds = new Map([
  ['sp', 'nvSpPr'],
  ['graphicFrame', 'nvGraphicFramePr'],
  ['grpSp', 'nvGrpSpPr'],
  ['cxnSp', 'nvCxnSpPr'],
  ['pic', 'nvPicPr'],
])

/**
 * DrawingML shapes by local name, each with where its own non-visual properties (its cNvPr, whose
 * `hidden` the Selection pane sets) stand in it: in the element named (p:sp > p:nvSpPr > p:cNvPr),
 * or directly in it for '' (a Word group's shape, wpg:wgp > wps:wsp > wps:cNvPr).
 */
export type ShapeKinds = ReadonlyMap<string, string>

/**
 * The depth of the shape whose own non-visual properties a cNvPr at `depth` is, or undefined for
 * one that is no shape's own (a cNvPr deeper in it says nothing of the shape). `names` are the
 * local names of the elements open, by depth: '' for one outside the shapes' namespaces.
 */
export function shapeOwning(names: readonly string[], depth: number, kinds: ShapeKinds): number | undefined {
  const [grand, parent] = [names[depth - 2], names[depth - 1]]
  if (parent !== undefined && kinds.get(parent) === '') return depth - 1
  if (grand !== undefined && parent && kinds.get(grand) === parent) return depth - 2
  return undefined
}
/** An attribute's name is written as it is: a part without these bytes hides no shape. */
const MARKER = Buffer.from('hidden')

/** xsd:boolean, whitespace collapsed: "1" and "true" are true ("0", "false" and anything else shown). */
const isTrue = (value: string | undefined) => value !== undefined && ['1', 'true'].includes(value.trim())

/** A PresentationML element's local name, or undefined for another namespace's. */
function presentationName(qname: string, namespaceOf: NamespaceOf): string | undefined {
  const colon = qname.indexOf(':')
  const prefix = colon < 0 ? '' : qname.slice(0, colon)
  return prefix === 'p' || PRESENTATION_NAMESPACES.has(namespaceOf(prefix) ?? '') ? qname.slice(colon + 1) : undefined
}

/**
 * The package with its slide and notes parts' hidden shapes left out, and its parts as they are
 * then (for the slides' facts and charts, read beside officeparser); `bytes` itself when no shape
 * is hidden. `entries` are its zip entries, inflated within the cap by the zip guard and each
 * exactly its local entry (zip-layout.ts): named as officeparser names them. Throws
 * ElementCapExceeded past `maxElements` in the parts scanned (officeparser, which reads them
 * all, would refuse the document too), and DocumentRefused for one that is not well-formed.
 */
export function withoutHiddenShapes(bytes: Uint8Array, entries: ZipEntry[], limits: { maxElements: number; zip: ZipLimits }): { bytes: Uint8Array; parts: PackageParts } {
  const budget: Budget = { left: limits.maxElements }
  const replaced = new Map<ZipEntry, Uint8Array>()
  for (const entry of entries) {
    if (!SHAPES_PART.test(entry.name)) continue
    const data = readSmallEntry(bytes, entry, entry.uncompressedSize)
    const part = data && Buffer.from(data.buffer, data.byteOffset, data.byteLength)
    if (part === undefined || !part.includes(MARKER)) continue
    const kept = shownRanges(part.toString('latin1'), budget)
    if (kept === 'malformed') throw new DocumentRefused(`the PPTX file is damaged: its part "${cutText(entry.name, 100)}" is not well-formed XML`)
    if (kept !== undefined) replaced.set(entry, Buffer.concat(kept.map(([start, end]) => part.subarray(start, end))))
  }
  if (replaced.size === 0) return { bytes, parts: new PackageParts(bytes, entries) }
  const rewritten = replaceEntries(bytes, entries, replaced)
  return { bytes: rewritten, parts: rewrittenParts(rewritten, limits.zip) }
}

/**
 * The ranges of `xml` to keep, in order, its hidden shapes cut out; undefined when no shape is
 * hidden. A root is never cut (the part would be no document): officeparser reads shapes in a
 * p:spTree only, so a root shape is read by no one.
 */
function shownRanges(xml: string, budget: Budget): Array<[number, number]> | 'malformed' | undefined {
  /** The ranges cut, in order of their start: a shape's own as it ends, replacing those cut inside it. */
  const cuts: Array<{ start: number; end: number }> = []
  /** The shapes open, innermost last. */
  const shapes: Array<{ start: number; depth: number; cutsBefore: number; hidden: boolean }> = []
  /** The PresentationML local name of each open element ('' for another's), by depth. */
  const names: string[] = []
  const wellFormed = scanWord(
    xml,
    (_name, attributes, depth, start, qname, namespaceOf) => {
      take(budget)
      const name = presentationName(qname, namespaceOf) ?? ''
      names.length = depth
      names.push(name)
      if (SHAPES.has(name) && depth > 0) shapes.push({ start, depth, cutsBefore: cuts.length, hidden: false })
      else if (name === 'cNvPr' && isTrue(attributes.hidden)) {
        // The shape's own non-visual properties only: p:nvSpPr/p:cNvPr directly in a p:sp, say.
        const shape = shapes.at(-1)
        if (shape !== undefined && shape.depth === shapeOwning(names, depth, SHAPES)) shape.hidden = true
      }
    },
    {
      onClose(_name, start, end) {
        if (shapes.at(-1)?.start !== start) return
        const shape = shapes.pop()!
        if (!shape.hidden) return
        cuts.length = shape.cutsBefore
        cuts.push({ start, end })
      },
    },
  )
  if (!wellFormed) return 'malformed'
  if (cuts.length === 0) return undefined
  const kept: Array<[number, number]> = []
  let at = 0
  for (const cut of cuts) {
    kept.push([at, cut.start])
    at = cut.end
  }
  kept.push([at, xml.length])
  return kept
}
