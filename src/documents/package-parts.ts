import { Parser } from 'htmlparser2'
import { readCentralDirectory, readSmallEntry, type ZipEntry, type ZipLimits } from './zip-guard'

// The parts of an OOXML package (its zip entries, already inflated once by the zip guard within
// the cap) and their relationships, for what the gateway reads beside officeparser: charts and
// slides' facts. Relationships are resolved as officeparser resolves them, so a part named here is
// the part officeparser read.

export interface Relationship {
  type: string
  /** The target as written. */
  target: string
  /** The part it names in the package; undefined for an external (http, https) target. */
  path: string | undefined
  /** Marked `TargetMode="External"`: whatever its target, it names no part of the package (OPC). */
  external: boolean
}

/** What scanXml reports beside each element's start. */
export interface XmlEvents {
  /** An element's end: its start tag began at `start`, and it ends (its end tag, or its self-closing start tag) before `end`. */
  onClose?(name: string, start: number, end: number): void
  /** Text (entities decoded), in pieces: one element's text may come as several. */
  onText?(text: string): void
}

/**
 * Walks the elements of `xml` (entities decoded; comments and processing instructions are not
 * elements), each opened at `start` (the index of its start tag). False when the XML is not
 * well-formed enough for a DOM parser to read it: an element left open, or one closed while an
 * element inside it was still open. officeparser skips such a dispensable part (a presentation's
 * slide list, its relationships), so its readers here must too.
 */
export function scanXml(xml: string, onOpen: (name: string, attributes: Record<string, string>, depth: number, start: number) => void, events: XmlEvents = {}): boolean {
  // Where each open element's start tag began: htmlparser2 reports a self-closing tag's end, and
  // an element it had to close itself, both as an implied close; only the first is in that tag.
  const starts: number[] = []
  let wellFormed = true
  const parser: Parser = new Parser(
    {
      onopentag(name, attributes) {
        onOpen(name, attributes, starts.length, parser.startIndex)
        starts.push(parser.startIndex)
      },
      onclosetag(name, isImplied) {
        const start = starts.pop()!
        if (isImplied && start !== parser.startIndex) wellFormed = false
        // htmlparser2's endIndex stops short of the '>' of an end tag written "</w:p >".
        else if (events.onClose) events.onClose(name, start, xml.indexOf('>', parser.endIndex) + 1 || xml.length)
      },
      ontext(text) {
        events.onText?.(text)
      },
    },
    { xmlMode: true, decodeEntities: true },
  )
  parser.end(xml)
  return wellFormed
}

/** A target's part, relative to `folder` (the part's own, "" for the root) or, with a leading slash, to the package root: officeparser's resolvePartPath. */
export function resolvePartPath(folder: string, target: string): string {
  const segments: string[] = []
  for (const segment of (target.startsWith('/') ? target.slice(1) : folder + target).split('/')) {
    if (segment === '..') segments.pop()
    else if (segment !== '' && segment !== '.') segments.push(segment)
  }
  return segments.join('/')
}

export class PackageParts {
  private readonly byName: Map<string, ZipEntry>
  private readonly decoder = new TextDecoder()

  /**
   * `maxPartBytes` caps what one part may inflate to when it is read: the sniffer reads the
   * package's relationships before the zip guard has inflated anything, and reads no more.
   */
  constructor(
    private readonly bytes: Uint8Array,
    readonly entries: ZipEntry[],
    private readonly maxPartBytes = Number.POSITIVE_INFINITY,
  ) {
    this.byName = new Map(entries.map(entry => [entry.name, entry]))
  }

  has(name: string): boolean {
    return this.byName.has(name)
  }

  /** A part's text (UTF-8), or undefined when the package has no such part or it cannot be inflated (within maxPartBytes). */
  text(name: string): string | undefined {
    const entry = this.byName.get(name)
    const data = entry && readSmallEntry(this.bytes, entry, Math.min(entry.uncompressedSize, this.maxPartBytes))
    return data === undefined ? undefined : this.decoder.decode(data)
  }

  /** The main part: the one the package's officeDocument relationship (transitional or strict) names, what Word opens. */
  main(): string | undefined {
    return [...(this.relationships('')?.values() ?? [])].find(({ type, external }) => type.endsWith('/relationships/officeDocument') && !external)?.path
  }

  /**
   * A part's relationships by id, read as officeparser reads them (`Relationship` elements with
   * an Id, a Type and a Target; the last of an id wins), or undefined when the part has none or
   * they are not well-formed XML.
   */
  relationships(part: string): Map<string, Relationship> | undefined {
    const folder = part.slice(0, part.lastIndexOf('/') + 1)
    const xml = this.text(`${folder}_rels/${part.slice(folder.length)}.rels`)
    if (xml === undefined) return undefined
    const found = new Map<string, Relationship>()
    const wellFormed = scanXml(xml, (name, attributes) => {
      const { Id: id, Type: type, Target: target } = attributes
      if (name !== 'Relationship' || !id || !type || !target) return
      const web = target.startsWith('http://') || target.startsWith('https://')
      found.set(id, { type, target, path: web ? undefined : resolvePartPath(folder, target), external: attributes.TargetMode === 'External' })
    })
    return wellFormed ? found : undefined
  }
}

/** The parts of a package a rewrite wrote again (docx-package.ts, hidden-shapes.ts), its directory read anew. */
export function rewrittenParts(bytes: Uint8Array, zip: ZipLimits): PackageParts {
  const directory = readCentralDirectory(bytes, zip)
  if (!directory.ok) throw new Error(`a rewritten package cannot be read again: ${directory.message}`)
  return new PackageParts(bytes, directory.entries)
}
