import { cutText } from '../lib/characters'
import type { ZipEntry } from './zip-guard'

// The zip guard reads the central directory, but the parsers do not all read what it lists.
// officeparser's unzip (fflate's streaming Unzip) never reads the directory: it walks the local
// headers from offset 0, skipping any bytes until a local header signature, and takes every entry
// it finds there, named, sized and compressed as its local header says. SheetJS reads the
// directory, but names and sizes each entry by its local header (and by a ZIP64 field, if one is
// there, whatever the header says). So the guard reads an archive only when its local entries are
// exactly the directory's: from offset 0, back to back in the directory's offset order, each with
// the directory record's name bytes, method and sizes, then the directory. Real Office files
// (Word, LibreOffice) are laid out so; the check reads headers only.

const LOCAL = 0x04034b50
const CENTRAL = 0x02014b50
const DESCRIPTOR = 0x08074b50
const DESCRIPTOR_FLAG = 0x8
const ZIP64_FIELD = 0x0001
const signature = (value: number) => {
  const bytes = Buffer.alloc(4)
  bytes.writeUInt32LE(value)
  return bytes
}
const LOCAL_SIGNATURE = signature(LOCAL)
const ANY_SIGNATURE = [LOCAL_SIGNATURE, signature(DESCRIPTOR), signature(CENTRAL)]

export const UNLISTED = 'the zip container holds entries or data its central directory does not list (a malformed or hostile file)'
export const ZIP64 = 'ZIP64 containers are not supported (an office document under 4 MiB never needs one)'

/**
 * Whether the extra field at `start` holds a ZIP64 record saying other sizes than `entry`'s: a
 * reader taking sizes from it (SheetJS does, whatever the header says) would read another entry.
 * One that repeats the sizes (some writers add it to every entry), or holds zeros in a local
 * header whose data descriptor follows (sizes unknown when it was written), says nothing else.
 */
export function zip64Differs(view: DataView, start: number, length: number, entry: ZipEntry, descriptor = false): boolean {
  const end = Math.min(start + length, view.byteLength)
  for (let at = start; at + 4 <= end; at += 4 + view.getUint16(at + 2, true)) {
    if (view.getUint16(at, true) !== ZIP64_FIELD) continue
    const size = view.getUint16(at + 2, true)
    // Original size, then compressed size, as far as the record holds them.
    const sizes = [entry.uncompressedSize, entry.compressedSize].slice(0, Math.floor(Math.min(size, 16) / 8))
    if (at + 4 + sizes.length * 8 > end) return true
    const said = sizes.map((_, index) => view.getBigUint64(at + 4 + index * 8, true))
    if (said.every((value, index) => value === BigInt(sizes[index]!))) continue
    if (descriptor && said.every(value => value === 0n)) continue
    return true
  }
  return false
}

/**
 * Why the local entries are not exactly the directory's `entries` (`records`: each one's central
 * record offset; `directory`: where the directory starts), or undefined when they are.
 */
export function checkLayout(bytes: Uint8Array, entries: ZipEntry[], records: number[], directory: number): string | undefined {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const order = entries.map((_, index) => index).sort((a, b) => entries[a]!.localHeaderOffset - entries[b]!.localHeaderOffset)
  let at = 0
  for (const index of order) {
    const entry = entries[index]!
    const mismatch = `zip entry "${cutText(entry.name, 100)}" has a local header that does not match its central directory record (a malformed or hostile file)`
    if (entry.localHeaderOffset !== at) return entry.localHeaderOffset > at ? UNLISTED : mismatch
    if (at + 30 > bytes.byteLength || view.getUint32(at, true) !== LOCAL) return mismatch
    const nameLength = view.getUint16(at + 26, true)
    const extraLength = view.getUint16(at + 28, true)
    const start = at + 30 + nameLength + extraLength
    const end = start + entry.compressedSize
    if (end > bytes.byteLength) return 'the file is a truncated zip container'
    const record = records[index]!
    const name = buffer.subarray(at + 30, at + 30 + nameLength)
    if (view.getUint16(record + 28, true) !== nameLength || !name.equals(buffer.subarray(record + 46, record + 46 + nameLength))) return mismatch
    if (view.getUint16(at + 8, true) !== entry.method) return mismatch
    if (zip64Differs(view, at + 30 + nameLength, extraLength, entry, (view.getUint16(at + 6, true) & DESCRIPTOR_FLAG) !== 0)) return ZIP64
    if (!(view.getUint16(at + 6, true) & DESCRIPTOR_FLAG)) {
      // The sizes a streaming reader takes from the local header.
      if (view.getUint32(at + 18, true) !== entry.compressedSize || view.getUint32(at + 22, true) !== entry.uncompressedSize) return mismatch
      at = end
      continue
    }
    if (entry.method === 0) return `zip entry "${cutText(entry.name, 100)}" is stored with a data descriptor, so where it ends cannot be told from its local header (a malformed or hostile file)`
    const next = descriptorEnd(buffer, view, start, end)
    if (next === undefined) return mismatch
    at = next
  }
  if (at !== directory) return UNLISTED
  // A streaming reader looks for local headers in the directory and the end record's comment too.
  if (buffer.indexOf(LOCAL_SIGNATURE, at) >= 0) return UNLISTED
  return undefined
}

/**
 * Where the data descriptor after a descriptor-terminated entry's data (`start` to `end`, from the
 * directory's compressed size) ends, when a streaming reader ends the entry there too: fflate
 * (Unzip.push) ignores the local sizes and ends the data at the first local header, descriptor or
 * directory signature from `start`, taking the 12 bytes before a local header or the 16 before a
 * directory record as an unsigned descriptor (4 too many: it cuts the last entry's data short),
 * and 4 more bytes off when they hold a descriptor signature. So none may appear in the data, and
 * a signed descriptor (16 bytes) or an unsigned one (12) then a local header must follow it.
 */
function descriptorEnd(buffer: Buffer, view: DataView, start: number, end: number): number | undefined {
  if (end >= 4 && view.getUint32(end - 4, true) === DESCRIPTOR) return undefined
  const signed = end + 4 <= buffer.byteLength && view.getUint32(end, true) === DESCRIPTOR
  const after = end + (signed ? 16 : 12)
  if (after > buffer.byteLength) return undefined
  if (firstSignature(buffer, start, signed ? end : after, ANY_SIGNATURE) !== undefined) return undefined
  // After a signature fflate reads on from 12 bytes past it (fewer when a chunk of its input ends
  // within the descriptor), looking for local headers only.
  if (signed) return firstSignature(buffer, end + 4, after, [LOCAL_SIGNATURE]) === undefined ? after : undefined
  return after + 4 <= buffer.byteLength && view.getUint32(after, true) === LOCAL ? after : undefined
}

/** Where the first of `signatures` starts from `from` on, before `to`: every 4-byte window a byte scan reads. */
function firstSignature(buffer: Buffer, from: number, to: number, signatures: Buffer[]): number | undefined {
  const region = buffer.subarray(from, Math.min(buffer.byteLength, to + 3))
  let first: number | undefined
  for (const signature of signatures) {
    const at = region.indexOf(signature)
    if (at >= 0 && at < to - from && (first === undefined || at < first)) first = at
  }
  return first === undefined ? undefined : from + first
}
