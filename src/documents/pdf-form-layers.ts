import { inflateRawSync } from 'node:zlib'
import { boundary, dataStart, filtersOf, MAX_PDF_STREAM_BYTES, ownEntries, streamDictionary, zlibHeader } from './pdf-streams'
import type { Layers } from './pdf-layers'

// Whether a PDF may draw a form XObject whose own layer (/OC) is switched off: only then are its
// pages' operator lists read for such forms (pdf-layers.ts hiddenForms), ~1.5× the extraction
// time of a text PDF. Found before pdf.js reads the file, in every stream dictionary pdf.js could
// build: each one written after a `stream` keyword in the file, and those in object streams
// (pdf.js reads a stream inside an object stream too, where no byte of its dictionary shows in the
// file: a hidden form there was read before), decompressed here. Then, the document's layers
// known: a form whose /OC names a group by reference, one the document lists and shows when it
// opens, hides nothing; any other /OC (a membership dictionary, a group the document does not
// list), and anything that cannot be seen, may hide. So may any form naming a layer when a
// membership dictionary's type (/OCMD) shows anywhere: the object a group's reference names could
// be one (pdf.js reads the type, not the list), its policy or expression off while its groups are on.
// The stream scan is the prescan's (pdf-streams.ts), on data that already passed its caps.

/** A name ends at white space, a delimiter or the end. */
const END = String.raw`(?=[\s/<>\[\]()%{}]|$)`
const OC_KEY = new RegExp(String.raw`/OC${END}`)
const OC_REFERENCE = new RegExp(String.raw`/OC${END}\s*(\d{1,10})\s+(\d{1,5})\s+R${END}`, 'g')
const SUBTYPE = new RegExp(String.raw`/Subtype${END}\s*(/[^\s/<>\[\]()%{}]*)?`, 'g')
const OBJECT_STREAM = new RegExp(String.raw`/First${END}`)
const DECODE_PARAMETERS = new RegExp(String.raw`/(?:DecodeParms|DP)${END}`)
/** A membership dictionary's type, its letters #-escaped too: one anywhere may hide a form whose groups all show. */
const MEMBERSHIP = /\/(?:O|#4[fF])(?:C|#43)(?:M|#4[dD])(?:D|#44)(?![^\s/<>[\]()%{}])/
/** How deep object streams may nest inside one another before the rest counts as unseen. */
const MAX_DEPTH = 3

/**
 * The layer groups the file's form XObjects name in their own /OC, as pdf.js ids them ("6R", "6R1"
 * for generation 1), or undefined when some form may be hidden otherwise or the file cannot be
 * fully seen. Read before pdf.js has the bytes (it may take their buffer over).
 */
export function formLayerGroups(bytes: Uint8Array): string[] | undefined {
  const seen: Seen = { groups: new Set(), membership: false }
  if (!formsIn(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), 0, seen)) return undefined
  return seen.groups.size > 0 && seen.membership ? undefined : [...seen.groups]
}

/** Whether a form of the document may be hidden by its own layer when it opens (formLayerGroups' answer, the document's layers). */
export function mayHideForms(groups: string[] | undefined, layers: Layers): boolean {
  return groups === undefined || groups.some(id => layers.getGroup(id) === null || layers.isVisible({ type: 'OCG', id }) === false)
}

/** What the file's forms name: the groups; and whether a membership dictionary may be among what they name. */
interface Seen {
  groups: Set<string>
  membership: boolean
}

/** Adds what the forms in `file` name to `seen`; false when a form may be hidden otherwise, or something cannot be seen. */
function formsIn(file: Buffer, depth: number, seen: Seen): boolean {
  seen.membership ||= MEMBERSHIP.test(file.toString('latin1'))
  for (let at = file.indexOf('stream', 0, 'latin1'); at >= 0; at = file.indexOf('stream', at + 6, 'latin1')) {
    if (!boundary(file[at - 1]) || !boundary(file[at + 6])) continue
    const dictionary = streamDictionary(file, at)
    if (dictionary === undefined) {
      // pdf.js reads a stream keyword only right after a dictionary, comments between them skipped.
      if (afterDictionary(file, at)) return false
      continue
    }
    const own = ownEntries(dictionary).flat
    if (OC_KEY.test(own) && [...own.matchAll(SUBTYPE)].at(-1)?.[1] !== '/Image') {
      const references = [...own.matchAll(OC_REFERENCE)]
      // Every /OC key a plain reference (pdf.js keeps the last of a repeated key).
      if (references.length !== own.split(OC_KEY).length - 1) return false
      for (const [, number, generation] of references) seen.groups.add(generation === '0' ? `${Number(number)}R` : `${Number(number)}R${Number(generation)}`)
    }
    if (!OBJECT_STREAM.test(own)) continue
    // An object stream (pdf.js takes any stream with /First and /N for one): its objects are seen
    // through its data, decompressed as pdf.js decompresses it.
    const data = file.subarray(dataStart(file, at + 6))
    if (!zlibHeader(data)) {
      if (filtersOf(dictionary).length > 0) return false
      continue
    }
    if (depth >= MAX_DEPTH || DECODE_PARAMETERS.test(own)) return false
    let inflated: Buffer
    try {
      inflated = inflateRawSync(data.subarray(2), { maxOutputLength: MAX_PDF_STREAM_BYTES })
    } catch {
      return false
    }
    if (!formsIn(inflated, depth + 1, seen)) return false
  }
  return true
}

/**
 * Whether a `stream` keyword whose dictionary could not be read back may follow one: right after
 * `>>` (a dictionary too long to read back), or after a comment, which pdf.js skips.
 */
function afterDictionary(file: Buffer, keyword: number): boolean {
  let end = keyword - 1
  while (end >= 0 && WHITE_SPACE.has(file[end]!)) end--
  if (end < 1) return false
  if (file[end] === 0x3e && file[end - 1] === 0x3e) return true
  const lineStart = Math.max(file.lastIndexOf(0x0a, end), file.lastIndexOf(0x0d, end)) + 1
  return file.subarray(lineStart, end + 1).includes(0x25)
}

const WHITE_SPACE = new Set([0x00, 0x09, 0x0a, 0x0c, 0x0d, 0x20])
