import { zlibHeader } from './pdf-decoders'
import { Name, Ref, type PdfDict } from './pdf-dictionary'
import { flate } from './pdf-flate'
import { readStreamDictionaries } from './pdf-objects'
import { boundary, dataStart, MAX_PDF_INFLATED_BYTES, MAX_PDF_STREAM_BYTES, MAX_PDF_TABLE_EXCESS, planOf } from './pdf-streams'
import type { Layers } from './pdf-layers'

// Whether a PDF may draw a form XObject whose own layer (/OC) is switched off: only then are its
// pages' operator lists read for such forms (pdf-layers.ts hiddenForms), ~1.5× the extraction
// time of a text PDF. Found before pdf.js reads the file, from every stream dictionary pdf.js
// could build, read as pdf.js's parser reads it (pdf-dictionary.ts, the prescan's reader: the last
// of a repeated key, names' #-escapes, nested dictionaries and strings skipped). Then, the
// document's layers known: a form whose /OC names a group by reference, one the document lists
// and shows when it opens, hides nothing; any other /OC (a membership dictionary, a group the
// document does not list), and anything that cannot be seen, may hide. So may any form naming a
// layer when a membership dictionary's type (/OCMD) shows anywhere: the object a group's
// reference names could be one (pdf.js reads the type, not the list), its policy or expression
// off while its groups are on.
//
// Object streams: pdf.js reads a stream object stored in one too (no byte of its dictionary shows
// in the file: a hidden form there was read before), starting each object where the stream's
// header says, anywhere in its data. No object header marks where, so no reading can follow it:
// a `stream` keyword a dictionary may end at, in an object stream's data, is unseen (may hide);
// no writer stores a stream there, the specification forbids it. A Flate object stream is
// inflated to see whether it holds one (and membership types); one in any other chain, or
// uncompressed (its objects may then start anywhere in the file), is unseen. The prescan
// (extract.ts, before pdf.js) has already inflated and counted the same object streams; the
// inflating here keeps its caps too (64 MiB a stream, 256 MiB in all, the table work's slack a
// stream), beyond which it is unseen.

/** A membership dictionary's type, its letters #-escaped too: one anywhere may hide a form whose groups all show. */
const MEMBERSHIP = /\/(?:O|#4[fF])(?:C|#43)(?:M|#4[dD])(?:D|#44)(?![^\s/<>[\]()%{}])/

/**
 * The layer groups the file's form XObjects name in their own /OC, as pdf.js ids them ("6R", "6R1"
 * for generation 1), or undefined when some form may be hidden otherwise or the file cannot be
 * fully seen. Read before pdf.js has the bytes (it may take their buffer over).
 */
export function formLayerGroups(bytes: Uint8Array): string[] | undefined {
  const file = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const seen: Seen = { groups: new Set(), membership: MEMBERSHIP.test(file.toString('latin1')) }
  if (!formsIn(file, seen)) return undefined
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
function formsIn(file: Buffer, seen: Seen): boolean {
  const { byKeyword, tangled } = readStreamDictionaries(file)
  if (tangled) return false
  let inflated = 0
  for (let at = file.indexOf('stream', 0, 'latin1'); at >= 0; at = file.indexOf('stream', at + 6, 'latin1')) {
    if (!boundary(file[at - 1]) || !boundary(file[at + 6])) continue
    const dictionaries = byKeyword.get(at)
    if (dictionaries === undefined) {
      // No object header reads to it: pdf.js reaches it only as an uncompressed object stream's
      // object (unseen below) or in a broken file's repair; a stray word is no stream.
      if (afterDictionary(file, at)) return false
      continue
    }
    let objectStream = false
    for (const dictionary of dictionaries) {
      if (!formGroups(dictionary, seen.groups)) return false
      // An object stream: pdf.js takes any stream with /N and /First for one (planOf).
      const plan = planOf(dictionary)
      if (!plan.objectStream) continue
      if (plan.layers?.length !== 1 || plan.layers[0]!.kind !== 'Fl' || dictionary.has('DP') || dictionary.has('DecodeParms')) return false
      objectStream = true
    }
    if (!objectStream) continue
    const data = file.subarray(dataStart(file, at + 6))
    if (!zlibHeader(data)) return false
    // Inflated as pdf.js's own decoder reads an object stream (pdf-flate.ts): a fault, or the caps passed, leaves it unseen.
    const cap = Math.min(MAX_PDF_STREAM_BYTES, MAX_PDF_INFLATED_BYTES - inflated)
    const read = flate(data.subarray(2), cap, cap, MAX_PDF_TABLE_EXCESS)
    if (!read.complete) return false
    const objects = Buffer.from(read.head.buffer, read.head.byteOffset, read.head.byteLength)
    inflated += objects.byteLength
    seen.membership ||= MEMBERSHIP.test(objects.toString('latin1'))
    for (let inner = objects.indexOf('stream', 0, 'latin1'); inner >= 0; inner = objects.indexOf('stream', inner + 6, 'latin1')) {
      if (boundary(objects[inner - 1]) && boundary(objects[inner + 6]) && afterDictionary(objects, inner)) return false
    }
  }
  return true
}

/**
 * Adds the group a stream's own /OC names to `groups` (an image's aside: pdf.js draws no form of
 * it); false when its /OC is no plain reference.
 */
function formGroups(dictionary: PdfDict, groups: Set<string>): boolean {
  if (!dictionary.has('OC')) return true
  const subtype = dictionary.get('Subtype')
  if (subtype instanceof Name && subtype.name === 'Image') return true
  const group = dictionary.get('OC')
  if (!(group instanceof Ref)) return false
  groups.add(group.gen === 0 ? `${group.num}R` : `${group.num}R${group.gen}`)
  return true
}

/**
 * Whether a `stream` keyword may end a dictionary pdf.js reads from somewhere this reading does
 * not follow: right after `>>`, or after a comment (a `%` on the line before it), which pdf.js skips.
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
