import { decompressedSize, Held, type Decoded } from './pdf-decoders'

// FlateDecode as pdf.js's FlateStream (src/core/flate_stream.js) decodes it, counted: the prescan
// (pdf-streams.ts) measured Flate with node's zlib, which stops at the first fault pdf.js reads
// past. A stream opening with a copy from before its start ("invalid distance too far back" to
// zlib; pdf.js copies zeros) counted a few bytes, and pdf.js inflated 80 MiB after it (QA).
// pdf.js's own reading, where it is not zlib's:
// - a distance before the start copies zeros; in a dynamic block distance codes 30 and 31 copy
//   distance 0 (zeros); length codes 286 and 287 are 258 bytes;
// - Huffman codes are not checked: an over-subscribed set keeps the last code written to each
//   table entry, an incomplete one fails only when an unassigned entry is read, a literal set
//   without an end-of-block code runs to the data's end; a repeat (16) before any length repeats 0
//   and a repeat past the last length is dropped; 288 literal and 32 distance codes are allowed;
// - a stored block of LEN 0 and NLEN 0 is an empty block; any other LEN and NLEN that do not
//   match fail the stream; one cut short counts LEN whole;
// - a stored block's LEN is read from the next byte of the data, after whatever whole bytes the
//   last Huffman code's lookahead had taken (up to 15 bits ahead): those are dropped, where zlib
//   reads LEN from the byte boundary. Valid deflate data then reads two ways (`diverged`).
// - no checksum, no window size: the zlib header's two bytes are checked by the caller.
// pdf.js stops at its first error (getBytes throws to its reader) or after the final block.
//
// For content streams, fonts and CMaps pdf.js first tries the platform's DecompressionStream
// (zlib: Bun's checks the window, the checksum, and that nothing follows), and reads with its own
// decoder when that fails. Up to zlib's first fault both read the same, and pdf.js's decoder never
// stops before zlib does, so its count bounds zlib's; but where a stored block's LEN diverges
// (above) valid data reads two ways, and both are counted (inflate).
//
// Table work: pdf.js builds each dynamic block's tables whole, 2^maxLength entries (32,768 for a
// 15-bit code), and a block of a dozen bytes (an incomplete code set zlib refuses) decodes to
// nothing: 100,000 of them, read again under 100 overlapping `stream` keywords, took the prescan
// 40 s on a 1.25 MB file (review). Legitimate data builds few for what it reads and writes: zlib's
// blocks hold thousands of codes (memLevel 1: 128), and an optimal code reaches 15 bits only over
// thousands; 4 entries a byte read and written sufficed for zlib at every level, strategy and
// memLevel tried. So a decoding may build TABLE_ENTRIES_PER_BYTE entries for each byte it reads
// and writes, and past that only its `slack` (the document's, in pdf-streams.ts): beyond it, it
// stops (`tables` then exceeds the slack). 8 leaves legitimate data twice its need; with the
// document's 256 MiB it bounds the table work to ~2 billion entries, ~0.75 s of copying on this
// 2-core VM (a review measured ~2.9 billion entries a second; at 16 a crafted file took ~1.5 s).

/** Table entries a Flate decoding may build for each byte it reads and writes (above). */
export const TABLE_ENTRIES_PER_BYTE = 8

/** A Huffman table as pdf.js builds it: entry `length << 16 | symbol` for every `maxLength`-bit lookahead. */
interface Table {
  codes: Int32Array
  maxLength: number
}

// pdf.js's tables: code length code order, length and distance bases (extra bits << 16 | base).
const ORDER = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]
const LENGTHS = [3, 4, 5, 6, 7, 8, 9, 10, 65547, 65549, 65551, 65553, 131091, 131095, 131099, 131103, 196643, 196651, 196659, 196667, 262211, 262227, 262243, 262259, 327811, 327843, 327875, 327907, 258, 258, 258]
const DISTANCES = [1, 2, 3, 4, 65541, 65543, 131081, 131085, 196625, 196633, 262177, 262193, 327745, 327777, 393345, 393409, 459009, 459137, 524801, 525057, 590849, 591361, 657409, 658433, 724993, 727041, 794625, 798721, 868353, 876545]

// Each value's 15 bits reversed.
const REVERSED = new Uint16Array(1 << 15)
for (let value = 1; value < REVERSED.length; value++) REVERSED[value] = (REVERSED[value >> 1]! >> 1) | ((value & 1) << 14)

// A dynamic block's tables, built again for each (the decoding is synchronous: one at a time).
const scratch = { literals: new Int32Array(1 << 15), distances: new Int32Array(1 << 15), lengths: new Int32Array(1 << 7), counts: new Int32Array(16), sorted: new Uint16Array(320) }

/**
 * pdf.js's generateHuffmanTable, the same table, in `codes`: each code, shortest first and by
 * symbol, written at every entry whose low bits are its bits reversed, later ones overwriting (an
 * over-subscribed set). pdf.js writes each entry a code reaches, millions for 288 short codes;
 * here, as the table repeats every 2^len entries once the codes of length `len` are in, it is
 * built by doubling, a native copy, and each code written once.
 */
function huffmanTable(lengths: Uint8Array, codes: Int32Array): Table {
  const { counts, sorted } = scratch
  counts.fill(0)
  let maxLength = 0
  for (const length of lengths) {
    counts[length]!++
    if (length > maxLength) maxLength = length
  }
  // The symbols in pdf.js's order of writing: by length, then by symbol.
  for (let length = 1, start = 0; length <= maxLength; length++) [start, counts[length]] = [start + counts[length]!, start]
  for (let symbol = 0; symbol < lengths.length; symbol++) if (lengths[symbol]! > 0) sorted[counts[lengths[symbol]!]!++] = symbol
  codes[0] = 0
  let code = 0
  for (let length = 1, period = 1, next = 0; length <= maxLength; length++, code <<= 1) {
    codes.copyWithin(period, 0, period)
    period <<= 1
    for (const end = counts[length]!; next < end; next++, code++) codes[REVERSED[code & (period - 1)]! >> (15 - length)] = (length << 16) | sorted[next]!
  }
  return { codes, maxLength }
}

const FIXED_LITERALS = huffmanTable(Uint8Array.from({ length: 288 }, (_, symbol) => (symbol < 144 ? 8 : symbol < 256 ? 9 : symbol < 280 ? 7 : 8)), new Int32Array(1 << 9))
// pdf.js's fixed distance table leaves codes 30 and 31 out (entries 15 and 31, the codes
// reversed): there they fail the stream, where a dynamic block's table copies zeros for them.
const FIXED_DISTANCES = huffmanTable(new Uint8Array(32).fill(5), new Int32Array(1 << 5))
FIXED_DISTANCES.codes[15] = FIXED_DISTANCES.codes[31] = 0

/** pdf.js throws: its reader gets no more of the stream. */
class Failed extends Error {}
/** The table work passed the slack: read no further (pdf.js would). */
class Overworked extends Failed {}

/** pdf.js's getBits and getCode over the data: `buffer` and `bits` are its codeBuf and codeSize. */
class Reader {
  at = 0
  buffer = 0
  bits = 0
  /** The output counted so far, kept here when a block fails midway. */
  size = 0
  constructor(readonly data: Uint8Array) {}

  read(count: number): number {
    while (this.bits < count) {
      if (this.at >= this.data.length) throw new Failed()
      this.buffer |= this.data[this.at++]! << this.bits
      this.bits += 8
    }
    const value = this.buffer & ((1 << count) - 1)
    this.buffer >>= count
    this.bits -= count
    return value
  }

  /** A code: `maxLength` bits looked up (fewer at the data's end, when the code fits in those). */
  code({ codes, maxLength }: Table): number {
    while (this.bits < maxLength && this.at < this.data.length) {
      this.buffer |= this.data[this.at++]! << this.bits
      this.bits += 8
    }
    const entry = codes[this.buffer & ((1 << maxLength) - 1)]!
    const length = entry >> 16
    if (length < 1 || this.bits < length) throw new Failed()
    this.buffer >>= length
    this.bits -= length
    return entry & 0xffff
  }
}

export interface Flated extends Decoded {
  /** A stored block's LEN was read past bytes zlib reads it from: zlib (pdf.js's native path) decodes this data otherwise. */
  diverged: boolean
  /** It ended at its final block, where zlib would have too. */
  complete: boolean
  /** Table entries built past TABLE_ENTRIES_PER_BYTE for each byte read and written: beyond `slack`, it stopped there. */
  tables: number
}

/**
 * Raw deflate data (after the two-byte header) decoded as pdf.js's FlateStream decodes it: its
 * size counted to just past `cap`, its first `keep` bytes held, its table work to `slack` entries
 * past its bytes' share (above). Once those are held no byte is written at all (the decoding never
 * depends on them), so a bomb is counted at a few operations a copy.
 */
export function flate(data: Uint8Array, cap: number, keep: number, slack: number): Flated {
  const reader = new Reader(data)
  const held = new Held(keep)
  const excess = () => entries - TABLE_ENTRIES_PER_BYTE * (reader.at + reader.size)
  let entries = 0
  let size = 0
  let diverged = false
  let final = false
  try {
    while (!final && size <= cap) {
      let header: number
      try {
        header = reader.read(3)
      } catch {
        break // pdf.js: the data's end, read as the stream's
      }
      final = (header & 1) === 1
      header >>= 1
      if (header === 0) {
        // A stored block: LEN and NLEN from the data's next bytes, past any the lookahead took.
        if (reader.bits >= 8) diverged = true
        const at = reader.at
        if (at + 4 > data.length) {
          final = false // pdf.js: the data's end
          break
        }
        const length = data[at]! | (data[at + 1]! << 8)
        const check = data[at + 2]! | (data[at + 3]! << 8)
        if (check !== (~length & 0xffff) && (length !== 0 || check !== 0)) throw new Failed()
        const present = Math.min(length, data.length - at - 4)
        if (length > 0 && !held.full) {
          // (An empty block holds nothing: a run of them costs only its reading, charged by the caller.)
          // Counted whole when cut short, zeros past the data's end, as pdf.js counts it.
          const room = held.room(length)
          held.bytes.set(data.subarray(at + 4, at + 4 + Math.min(room, present)), held.length)
          held.length += room
        }
        size += length
        reader.size = size
        reader.at = at + 4 + present
        reader.buffer = reader.bits = 0
        if (present < length || (length === 0 && reader.at >= data.length)) break
        continue
      }
      let literals = FIXED_LITERALS
      let distances = FIXED_DISTANCES
      if (header === 2) {
        ;[literals, distances, entries] = dynamicTables(reader, entries)
        if (excess() > slack) throw new Overworked()
      } else if (header !== 1) throw new Failed()
      size = huffmanBlock(reader, literals, distances, held, size, cap)
      reader.size = size
    }
  } catch (error) {
    if (!(error instanceof Failed)) throw error
    final = false
    size = reader.size
  }
  return { size, read: reader.at, head: held.view(), diverged, complete: final && size <= cap, tables: Math.max(0, excess()) }
}

/** A dynamic block's header: its code lengths, read as pdf.js reads them, and the two tables; `entries` counts those built. */
function dynamicTables(reader: Reader, entries: number): [Table, Table, number] {
  const literalCount = reader.read(5) + 257
  const distanceCount = reader.read(5) + 1
  const lengthCount = reader.read(4) + 4
  const lengthLengths = new Uint8Array(19)
  for (let index = 0; index < lengthCount; index++) lengthLengths[ORDER[index]!] = reader.read(3)
  const lengthTable = huffmanTable(lengthLengths, scratch.lengths)
  entries += 1 << lengthTable.maxLength
  const total = literalCount + distanceCount
  const lengths = new Uint8Array(total)
  let previous = 0
  for (let index = 0; index < total; ) {
    const code = reader.code(lengthTable)
    if (code < 16) {
      lengths[index++] = previous = code
      continue
    }
    let value = 0
    let repeat: number
    if (code === 16) {
      value = previous
      repeat = reader.read(2) + 3
    } else {
      previous = 0
      repeat = code === 17 ? reader.read(3) + 3 : reader.read(7) + 11
    }
    while (repeat-- > 0) lengths[index++] = value // past the last: dropped
  }
  const literals = huffmanTable(lengths.subarray(0, literalCount), scratch.literals)
  const distances = huffmanTable(lengths.subarray(literalCount), scratch.distances)
  return [literals, distances, entries + (1 << literals.maxLength) + (1 << distances.maxLength)]
}

/**
 * A Huffman block's codes up to its end (or `cap`), counted, the held output written: pdf.js's
 * loop, with the reader's state in locals (the hot path of every legitimate stream).
 */
function huffmanBlock(reader: Reader, literals: Table, distances: Table, held: Held, size: number, cap: number): number {
  const { data } = reader
  const end = data.length
  const { codes: literalCodes, maxLength: literalBits } = literals
  const { codes: distanceCodes, maxLength: distanceBits } = distances
  let { at, buffer, bits } = reader
  let holding = held.length < held.keep
  try {
    for (;;) {
      // getCode: up to maxLength bits looked ahead (fewer at the data's end), then the entry's length used.
      while (bits < literalBits && at < end) {
        buffer |= data[at++]! << bits
        bits += 8
      }
      let entry = literalCodes[buffer & ((1 << literalBits) - 1)]!
      let used = entry >> 16
      if (used < 1 || bits < used) throw new Failed()
      buffer >>= used
      bits -= used
      let symbol = entry & 0xffff
      if (symbol < 256) {
        if (holding) {
          if (held.room(1) > 0) held.bytes[held.length++] = symbol
          holding = !held.full
        }
        size++
        continue
      }
      if (symbol === 256) return size
      symbol = LENGTHS[symbol - 257]!
      // getBits: the extra bits, none past the data's end.
      used = symbol >> 16
      for (; bits < used; bits += 8) {
        if (at >= end) throw new Failed()
        buffer |= data[at++]! << bits
      }
      const length = (symbol & 0xffff) + (buffer & ((1 << used) - 1))
      buffer >>= used
      bits -= used
      while (bits < distanceBits && at < end) {
        buffer |= data[at++]! << bits
        bits += 8
      }
      entry = distanceCodes[buffer & ((1 << distanceBits) - 1)]!
      used = entry >> 16
      if (used < 1 || bits < used) throw new Failed()
      buffer >>= used
      bits -= used
      symbol = DISTANCES[entry & 0xffff] ?? 0
      used = symbol >> 16
      for (; bits < used; bits += 8) {
        if (at >= end) throw new Failed()
        buffer |= data[at++]! << bits
      }
      const distance = (symbol & 0xffff) + (buffer & ((1 << used) - 1))
      buffer >>= used
      bits -= used
      if (holding) {
        copy(held, length, distance)
        holding = !held.full
      }
      size += length
      if (size > cap) return size
    }
  } finally {
    reader.at = at
    reader.buffer = buffer
    reader.bits = bits
    reader.size = size
  }
}

/** A copy into the held output: from `distance` back, zeros before the start and at distance 0 (pdf.js reads its buffer's unwritten bytes). */
function copy(held: Held, length: number, distance: number): void {
  const room = held.room(length)
  const { bytes } = held
  let to = held.length
  const end = to + room
  if (distance > 0) for (let from = to - distance; to < end && from < 0; to++, from++) bytes[to] = 0
  if (distance > 0) for (; to < end; to++) bytes[to] = bytes[to - distance]!
  else bytes.fill(0, to, end)
  held.length = end
}

/**
 * A Flate stream's data after its zlib header, counted as pdf.js may hold it: as its FlateStream
 * reads it, and where zlib (its native path) reads the data otherwise, that too, added.
 */
export async function inflate(data: Uint8Array, cap: number, keep: number, slack: number): Promise<Decoded> {
  const read = flate(data, cap, keep, slack)
  if (!read.diverged || read.size > cap || read.tables > slack) return read
  const native = await decompressedSize(data, false, cap, keep)
  return { size: read.size + native.size, read: read.read, head: read.head, other: native.head, tables: read.tables }
}
