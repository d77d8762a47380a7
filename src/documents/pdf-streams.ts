import { ascii85, asciiHex, decompressedSize, lzw, opensLikeZlib, runLength, SYNC_BYTES, zlibHeader, type Decoded } from './pdf-decoders'
import { inflate } from './pdf-flate'
import { Name, Ref, type PdfDict, type PdfValue } from './pdf-dictionary'
import { addStream, ObjectReader, objectsOf, readObjects, readStreamDictionaries, withStoredObjects, type Objects, type StreamDictionaries, type StreamObject } from './pdf-objects'

// The PDF stream bomb defence (SECURITY-NOTES §5): a 1 MB PDF whose one content stream inflates
// to a gigabyte of spaces took pdf.js past 2 GB, and nothing else bounds what a stream inflates
// to (zips have their running cap, zip-guard.ts). So before pdf.js builds anything, every stream
// it could decompress is decompressed here, with the filters its dictionary names as pdf.js reads
// it (pdf-dictionary.ts), its output counted and thrown away, under a cap per stream and a
// running cap for the document.

/**
 * The most bytes one PDF stream may decompress to. A page's content stream is tens of KB, a dense
 * vector drawing a few MB, a large image (which the gateway never decodes, but cannot tell from
 * a content stream) tens of MB.
 */
export const MAX_PDF_STREAM_BYTES = 64 * 1024 * 1024
/** The most bytes all of a PDF's streams may decompress to together (a 1,500-page text PDF: ~10 MB), and the JavaScript decoders read. */
export const MAX_PDF_INFLATED_BYTES = 256 * 1024 * 1024
/**
 * The most Huffman table entries a PDF's Flate data may build past its bytes' share
 * (pdf-flate.ts TABLE_ENTRIES_PER_BYTE): 512 tables of 15-bit codes, ~3 ms of copying.
 */
export const MAX_PDF_TABLE_EXCESS = 16 * 1024 * 1024

export interface StreamLimits {
  maxStreamBytes: number
  maxInflatedBytes: number
  maxTableExcess: number
}

const defaults: StreamLimits = { maxStreamBytes: MAX_PDF_STREAM_BYTES, maxInflatedBytes: MAX_PDF_INFLATED_BYTES, maxTableExcess: MAX_PDF_TABLE_EXCESS }
const mb = (bytes: number) => `${Math.round(bytes / (1024 * 1024))} MiB`
const TWICE = 'the PDF compresses a stream twice over (its decompressed data is compressed again), as only a decompression bomb does'

/**
 * Why the PDF's streams are refused, or undefined. Every `stream` keyword in the file is
 * looked at, not only those the object structure shows: pdf.js opens whatever object a
 * cross-reference offset points at, inside another stream's data too. Each is decoded as every
 * dictionary pdf.js may give it says (pdf-dictionary.ts: usually one), or, when its filters are
 * out of the prescan's sight, as anything (measureUnknown).
 */
export async function measurePdfStreams(bytes: Uint8Array, limits: StreamLimits = defaults): Promise<string | undefined> {
  return measureStreams(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), new Meter(limits), 0)
}

/**
 * The streams of `file`, at `depth` 0 the PDF itself, deeper an object stream's decoded data:
 * pdf.js reads a stream object stored in one as well (the specification forbids it), so a bomb
 * compressed into an object stream was invisible to a count of the file's own bytes. The file's
 * objects are read from their headers; an object stream's where its header (`objects`) puts them;
 * and in either, those of an object stream with no filter, whose objects pdf.js reads from the
 * same bytes, at offsets no header marks (QA: one inside another object's string named a filter
 * chain the header's reading did not).
 */
async function measureStreams(file: Buffer, meter: Meter, depth: number, objects?: Objects): Promise<string | undefined> {
  if (depth > 3) return 'the PDF stores object streams within object streams, as no writer does'
  const reader = new ObjectReader(file)
  const read: StreamDictionaries = depth === 0 ? readStreamDictionaries(file, reader) : readDecoded(file, reader, objects)
  const { byKeyword, tangled } = withStoredObjects(file, read, reader, storedHere(file))
  for (let at = file.indexOf('stream', 0, 'latin1'); at >= 0; at = file.indexOf('stream', at + 6, 'latin1')) {
    if (!boundary(file[at - 1]) || !boundary(file[at + 6])) continue
    const start = dataStart(file, at + 6)
    if (start >= file.length) continue
    const dictionaries = byKeyword.get(at) ?? []
    const plans = new Map<string, Plan>(dictionaries.map(dictionary => planOf(dictionary)).map(plan => [dictionaries.length > 1 ? JSON.stringify(plan) : '.', plan]))
    // A keyword in the file no object header reads to a dictionary: pdf.js reaches it only in ways
    // the reading does not follow (a broken file's repair). In an object stream's data, pdf.js
    // reads only the objects it stores.
    if (tangled || (plans.size === 0 && depth === 0)) plans.set('', { layers: undefined, length: undefined, image: false, objectStream: false, objects: undefined, earlyChanges: [1, 0] })
    for (const plan of plans.values()) {
      const refused = plan.layers ? await measureChain(file, start, plan, plan.layers, meter, depth) : await measureUnknown(file, start, plan, meter, depth)
      if (refused) return refused
    }
  }
  return undefined
}

/** An object stream's decoded data: its objects, or, its /N and /First not known here, anything (tangled). */
function readDecoded(data: Buffer, reader: ObjectReader, objects: Objects | undefined): StreamDictionaries {
  const byKeyword = new Map<number, PdfDict[]>()
  if (!objects) return { byKeyword, tangled: true }
  for (const stream of readObjects(reader, data, 0, objects)) addStream(byKeyword, stream)
  return { byKeyword, tangled: reader.tangled }
}

/** Whether a stream is an object stream whose data pdf.js reads from `file` itself (no filter, or unknown ones), and from where. */
const storedHere = (file: Buffer) => ({ keyword, dictionary }: StreamObject) => {
  const plan = planOf(dictionary)
  return plan.objectStream && (plan.layers === undefined || plan.layers.length === 0) ? { start: dataStart(file, keyword + 6), objects: plan.objects } : undefined
}

/**
 * The running count: each layer's output against the per-stream cap, and all of it (and what the
 * JavaScript decoders read: data that decodes to nothing costs its reading, and each `stream`
 * keyword inside another's data reads it again) against the document's; Flate's table work past
 * its bytes' share against its own slack.
 */
class Meter {
  private total = 0
  private tables = 0
  constructor(private readonly limits: StreamLimits) {}
  get cap(): number {
    return Math.min(this.limits.maxStreamBytes, this.limits.maxInflatedBytes - this.total)
  }
  /** The table entries a Flate decoding may still build past its bytes' share. */
  get tableSlack(): number {
    return this.limits.maxTableExcess - this.tables
  }
  charge(output: number, read = 0, tables = 0): string | undefined {
    if (output > this.limits.maxStreamBytes) return `a stream in the PDF decompresses to more than ${mb(this.limits.maxStreamBytes)} (a decompression bomb, or a document too large to read)`
    this.total += output + read
    this.tables += tables
    if (this.total > this.limits.maxInflatedBytes) return `the PDF's streams decompress to more than ${mb(this.limits.maxInflatedBytes)} in all (a decompression bomb, or a document too large to read)`
    if (this.tables > this.limits.maxTableExcess) return "the PDF's Flate data builds far more Huffman tables than its size accounts for, as only crafted data does"
    return undefined
  }
}

type Kind = 'Fl' | 'Br' | 'LZW' | 'RL' | 'AHx' | 'A85' | 'opaque'
interface Layer {
  kind: Kind
  name: string
  earlyChange: number
}
/** How pdf.js decodes a stream: its filters (undefined: not known here), its direct /Length, whether it is an image. */
interface Plan {
  layers: Layer[] | undefined
  length: number | undefined
  image: boolean
  /** Whether pdf.js could read it as an object stream (it has /N and /First): its decoded data is measured in turn. */
  objectStream: boolean
  /** Where its objects are, when known. */
  objects: Objects | undefined
  /** For unknown filters: the EarlyChange values an LZW layer may have. */
  earlyChanges: number[]
}

const KINDS = new Map<string, Kind>([
  ['Fl', 'Fl'], ['FlateDecode', 'Fl'], ['BrotliDecode', 'Br'], ['LZW', 'LZW'], ['LZWDecode', 'LZW'], ['RL', 'RL'], ['RunLengthDecode', 'RL'],
  ['AHx', 'AHx'], ['ASCIIHexDecode', 'AHx'], ['A85', 'A85'], ['ASCII85Decode', 'A85'],
  // Image codecs: never decoded for text, and not measured (README).
  ...['DCT', 'DCTDecode', 'JPX', 'JPXDecode', 'CCF', 'CCITTFaxDecode', 'JBIG2Decode'].map((name): [string, Kind] => [name, 'opaque']),
])
const EXPANDING = new Set<Kind>(['Fl', 'Br', 'LZW', 'RL'])

/**
 * A stream's dictionary as pdf.js's Parser.filter reads it: /F before /Filter and /DP before
 * /DecodeParms (present with any value), a name or an array of names (any other value: no
 * filter, and a non-name in the array fails the stream), names pdf.js does not know (Crypt in an
 * unencrypted file) passing the data on. A reference among the filters leaves them unknown.
 */
export function planOf(dictionary: PdfDict): Plan {
  const length = dictionary.get('Length')
  const direct = typeof length === 'number' && Number.isInteger(length) && length >= 0 ? length : undefined
  const filter = dictionary.has('F') ? dictionary.get('F') : dictionary.get('Filter')
  const params = dictionary.has('DP') ? dictionary.get('DP') : dictionary.get('DecodeParms')
  const objectStream = dictionary.has('N') && dictionary.has('First')
  const objects = objectsOf(dictionary)
  const names = filter instanceof Name || filter instanceof Ref ? [filter] : Array.isArray(filter) ? filter : []
  const layers: Layer[] = []
  for (let index = 0; index < names.length; index++) {
    const name = names[index]
    if (name instanceof Ref) {
      const each: Array<PdfValue | undefined> = Array.isArray(params) ? params : [params]
      return { layers: undefined, length: direct, image: false, objectStream, objects, earlyChanges: [...new Set([1, 0, ...each.map(earlyChange)])] }
    }
    if (!(name instanceof Name)) return { layers: [], length: direct, image: false, objectStream, objects, earlyChanges: [] } // pdf.js fails the stream here
    const kind = KINDS.get(name.name)
    if (kind) layers.push({ kind, name: name.name, earlyChange: kind === 'LZW' ? earlyChange(filter instanceof Name ? params : Array.isArray(params) ? params[index] : null) : 1 })
  }
  const subtype = dictionary.get('Subtype')
  return { layers, length: direct, image: subtype instanceof Name && subtype.name === 'Image', objectStream, objects, earlyChanges: [] }
}

/**
 * An LZW layer's EarlyChange as pdf.js takes it into its arithmetic (`nextCode + earlyChange`):
 * a number as is, null 0, a boolean 0 or 1, default 1; a value the prescan cannot see (a
 * reference) or that is no number (NaN) is the worst case, a code length of 0 bits (lzw()).
 */
function earlyChange(params: PdfValue | undefined): number {
  if (params instanceof Ref) return Number.NaN
  if (!(params instanceof Map) || !params.has('EarlyChange')) return 1
  const value = params.get('EarlyChange')
  return typeof value === 'number' ? value : value === null ? 0 : typeof value === 'boolean' ? Number(value) : Number.NaN
}

/**
 * A known chain, decoded layer by layer as pdf.js decodes it, every layer's output counted (pdf.js
 * holds each). ASCII layers are decoded whole (they shrink the data, but `z` in ASCII85); the
 * expanding one is counted as it decodes, and two of them are refused outright. A Flate or
 * Brotli output may open like zlib data again (raw pixels of #18191A do, regression QA): refused
 * as compressed twice over unless the stream is an image whose filters are all names, which
 * pdf.js here never decodes as anything else. LZW and RunLength read any bytes (an encrypted
 * file's, before pdf.js decrypts them): their output opens so by chance, one in a thousand.
 */
async function measureChain(file: Buffer, start: number, plan: Plan, layers: Layer[], meter: Meter, depth: number): Promise<string | undefined> {
  if (layers.filter(layer => EXPANDING.has(layer.kind)).length > 1) return `the PDF compresses a stream twice over (${layers.map(layer => layer.name).join(', ')}), as only a decompression bomb does`
  const end = () => streamEnd(file, start, plan.length)
  let data: Uint8Array | undefined // the last layer's output, held; undefined: the stream's own bytes
  let expanded: number | undefined // the last layer's output size, past an expanding one not held
  for (const layer of layers) {
    if (layer.kind === 'opaque') return undefined
    let refused: string | undefined
    if (expanded !== undefined) {
      // An ASCII layer after the expanding one: four bytes for each `z` at most, half for hex.
      expanded = layer.kind === 'A85' ? expanded * 4 : Math.ceil(expanded / 2)
      refused = meter.charge(expanded)
    } else if (layer.kind === 'AHx' || layer.kind === 'A85') {
      // The stream's own bytes are charged as read (white space decodes to nothing); a layer's output was already.
      const read = data === undefined ? asciiData(file, start, end, layer.kind) : undefined
      data = layer.kind === 'AHx' ? asciiHex(read ?? data!) : ascii85(read ?? data!, meter.cap)
      refused = meter.charge(data.byteLength, read?.byteLength)
    } else {
      // An object stream's output is held whole (to the cap), to be measured in turn.
      const out = await decode(layer.kind, layer.earlyChange, data ?? ownData(file, start, end, layer.kind), meter, plan.objectStream ? meter.cap : 2)
      if (out === undefined) return undefined
      const twice = opensLikeZlib(out) && !plan.image && (layer.kind === 'Fl' || layer.kind === 'Br')
      refused = meter.charge(out.size, data ? 0 : out.read, out.tables) ?? (twice ? TWICE : undefined)
      if (plan.objectStream) data = out.head
      else expanded = out.size
    }
    if (refused) return refused
  }
  return plan.objectStream && data ? measureStreams(asBuffer(data), meter, depth + 1, plan.objects) : undefined
}

const asBuffer = (data: Uint8Array) => Buffer.from(data.buffer, data.byteOffset, data.byteLength)

/**
 * Filters pdf.js finds through a reference, or a keyword no dictionary is known for: the stream
 * may be any chain, so every decoder that could come first is run over its data, behind an ASCII
 * layer or not, and every output counts, as if pdf.js decoded them all: the sum bounds any one
 * chain, and the time spent. An output held whole (to 1 MiB) is run again through every decoder,
 * so a second layer counts too. A Flate or Brotli output that opens like zlib data is refused as
 * compressed twice over (no image is spared: its filters are unknown), as is any output too large
 * to hold that does; LZW and RunLength read anything, and a small output of theirs that opens so
 * by chance (one in a thousand) is inflated and counted instead. Left to the watchdog: a second
 * layer under a first whose output passes 1 MiB (but Flate), and a third layer.
 */
async function measureUnknown(file: Buffer, start: number, plan: Plan, meter: Meter, depth: number): Promise<string | undefined> {
  const at = streamEnd(file, start, plan.length)
  const end = () => at
  const decoders: Array<[Kind, number]> = [['Fl', 1], ['Br', 1], ['RL', 1], ...plan.earlyChanges.map((value): [Kind, number] => ['LZW', value])]
  const twice = (kind: Kind, out: Decoded) => opensLikeZlib(out) && (kind === 'Fl' || kind === 'Br' || out.size > SYNC_BYTES)
  for (const ascii of [undefined, 'AHx', 'A85'] as const) {
    let data: Uint8Array | undefined
    if (ascii) {
      const input = asciiData(file, start, end, ascii)
      data = ascii === 'AHx' ? asciiHex(input) : ascii85(input, meter.cap)
      // An object stream of that layer alone holds its objects in its output.
      const refused = meter.charge(data.byteLength, input.byteLength) ?? (plan.objectStream ? await measureStreams(asBuffer(data), meter, depth + 1, plan.objects) : undefined)
      if (refused) return refused
    }
    for (const [kind, early] of decoders) {
      const out = await decode(kind, early, data ?? ownData(file, start, end, kind), meter, plan.objectStream ? meter.cap : SYNC_BYTES)
      if (out === undefined) continue
      const refused = meter.charge(out.size, data ? 0 : out.read, out.tables) ?? (twice(kind, out) ? TWICE : undefined) ?? (plan.objectStream ? await measureStreams(asBuffer(out.head), meter, depth + 1, plan.objects) : undefined)
      if (refused) return refused
      for (const [again, value] of out.size <= SYNC_BYTES ? decoders : []) {
        const second = await decode(again, value, out.head, meter, 2)
        const refused = second && (meter.charge(second.size, 0, second.tables) ?? (twice(again, second) ? TWICE : undefined))
        if (refused) return refused
      }
    }
  }
  return undefined
}

/** One expanding layer over `data`, counted to just past the meter's cap; undefined for Flate data without the zlib header pdf.js requires. */
async function decode(kind: Kind, earlyChange: number, data: Uint8Array, meter: Meter, keep: number): Promise<Decoded | undefined> {
  if (kind === 'LZW') return lzw(data, earlyChange, meter.cap, keep)
  if (kind === 'RL') return runLength(data, meter.cap, keep)
  if (kind === 'Br') return decompressedSize(data, true, meter.cap, keep)
  return zlibHeader(data) ? inflate(data.subarray(2), meter.cap, keep, meter.tableSlack) : undefined
}

const WHITE = new Set([0x00, 0x09, 0x0a, 0x0c, 0x0d, 0x20])
const DELIMITER = new Set([0x28, 0x29, 0x3c, 0x3e, 0x5b, 0x5d, 0x7b, 0x7d, 0x2f, 0x25])
export const boundary = (byte: number | undefined) => byte === undefined || WHITE.has(byte) || DELIMITER.has(byte)

/** Where pdf.js starts a stream's data: after the first end of line at or after the keyword's end (its Lexer.skipToNextLine). */
export function dataStart(file: Buffer, at: number): number {
  for (; at < file.length; at++) {
    if (file[at] === 0x0d) return file[at + 1] === 0x0a ? at + 2 : at + 1
    if (file[at] === 0x0a) return at + 1
  }
  return at
}

/**
 * Where a stream's data ends for pdf.js when nothing in the data ends it: at its /Length when
 * `endstream` follows there, else at the first `endstream` (pdf.js's own fallback), so the later
 * of the two covers both; a /Length given by reference, or none, leaves the end of the file.
 */
function streamEnd(file: Buffer, start: number, length: number | undefined): number {
  if (length === undefined) return file.length
  const keyword = file.indexOf('endstream', start, 'latin1')
  return Math.min(file.length, Math.max(start + length, keyword < 0 ? file.length : keyword))
}

/** The stream's own bytes for a first layer: Flate and Brotli data end themselves (pdf.js reads to /Length, which may pass any `endstream`); LZW and RunLength run to the stream's end. */
function ownData(file: Buffer, start: number, end: () => number, kind: Kind): Uint8Array {
  return kind === 'Fl' || kind === 'Br' ? file.subarray(start) : file.subarray(start, end())
}

/** An ASCII layer's bytes: up to its end character (`>`, or `~`), where pdf.js stops, or the stream's end. */
function asciiData(file: Buffer, start: number, end: () => number, kind: 'AHx' | 'A85'): Uint8Array {
  const data = file.subarray(start, end())
  const marker = data.indexOf(kind === 'AHx' ? 0x3e : 0x7e)
  return marker < 0 ? data : data.subarray(0, marker + 1)
}
