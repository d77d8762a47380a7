import { scanWord } from './docx-names'
import { readCentralDirectory, readSmallEntry, type ZipEntry, type ZipLimits } from './zip-guard'

// The parts of an OOXML package (its zip entries, already inflated once by the zip guard within
// the cap) and their relationships, for what the gateway reads beside officeparser: charts and
// slides' facts. Relationships are resolved as officeparser resolves them, so a part named here is
// the part officeparser read.

const PACKAGE_RELATIONSHIPS = 'http://schemas.openxmlformats.org/package/2006/relationships'

/**
 * Whose reading of a `.rels` part to follow. Office reads a `Relationship` element by its namespace,
 * whatever prefix it is written with (`<pr:Relationship>` with pr bound to the package
 * relationships namespace); officeparser by its name as written, so a prefixed one is none to it.
 * An unprefixed one counts for both, in whatever namespace, as it always has here.
 */
export type RelationshipReader = 'office' | 'officeparser'

export interface Relationship {
  type: string
  /** The target as written. */
  target: string
  /** The part it names in the package; undefined for an external (http, https) target. */
  path: string | undefined
  /** Marked `TargetMode="External"`: whatever its target, it names no part of the package (OPC). */
  external: boolean
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

  /**
   * The main part: the first officeDocument relationship (transitional or strict) of the package
   * that names a part, what Word opens. The first whatever its id: OPC wants ids unique, but whether
   * Word opens a package that repeats one is not known here, so such a package is read leniently,
   * not refused because a later relationship of the same id hid the main part's.
   */
  main(): string | undefined {
    return this.read('', 'office')?.find(([, { type, external }]) => type.endsWith('/relationships/officeDocument') && !external)?.[1].path
  }

  /**
   * A part's relationships by id (the last of an id wins), as `reader` reads them: `Relationship`
   * elements with an Id, a Type and a Target. Undefined when the part has none or they are not
   * well-formed XML.
   */
  relationships(part: string, reader: RelationshipReader = 'office'): Map<string, Relationship> | undefined {
    const found = this.read(part, reader)
    return found && new Map(found)
  }

  private read(part: string, reader: RelationshipReader): Array<[string, Relationship]> | undefined {
    const folder = part.slice(0, part.lastIndexOf('/') + 1)
    const xml = this.text(`${folder}_rels/${part.slice(folder.length)}.rels`)
    if (xml === undefined) return undefined
    const found: Array<[string, Relationship]> = []
    const wellFormed = scanWord(xml, (_name, attributes, _depth, _start, qname, namespaceOf) => {
      const colon = qname.indexOf(':')
      if (qname.slice(colon + 1) !== 'Relationship' || (colon >= 0 && (reader === 'officeparser' || namespaceOf(qname.slice(0, colon)) !== PACKAGE_RELATIONSHIPS))) return
      const { Id: id, Type: type, Target: target } = attributes
      if (!id || !type || !target) return
      const web = target.startsWith('http://') || target.startsWith('https://')
      found.push([id, { type, target, path: web ? undefined : resolvePartPath(folder, target), external: attributes.TargetMode === 'External' }])
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
