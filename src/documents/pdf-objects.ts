import { digit, Lexer, Parser, special, Tangled, Unreadable, type PdfDict } from './pdf-dictionary'

// Where pdf.js starts reading the objects of a file (pdf-dictionary.ts reads them as it does), for
// the prescan (pdf-streams.ts) to know every stream dictionary pdf.js may build: at every object
// header (`n g obj`), and in an object stream at the offsets its own header gives.

export interface StreamDictionaries {
  /** Each `stream` keyword's position → the dictionaries pdf.js may give it (one per object header that reads to it). */
  byKeyword: Map<number, PdfDict[]>
  /** Some object could not be read as pdf.js reads it: no stream's dictionary is certain. */
  tangled: boolean
}

/** A stream object's dictionary, and where its `stream` keyword starts. */
export interface StreamObject {
  keyword: number
  dictionary: PdfDict
}

/**
 * Objects read where pdf.js starts them in `bytes`, as its Parser reads them, all the readings
 * together within one budget: the bytes' length and 1 MiB (past it, objects crafted to make each
 * reading long, the reader is tangled).
 */
export class ObjectReader {
  private budget: number
  /** A reading went where this one cannot follow pdf.js, or past the budget: nothing it says is certain. */
  tangled = false

  constructor(private readonly bytes: Uint8Array) {
    this.budget = bytes.length + 1024 * 1024
  }

  /**
   * The stream the object at `at` is, if it is one. Skimmed first (names, arrays and dictionaries
   * not built: most objects are no stream), then read again when it ends at a `stream` keyword.
   */
  streamAt(at: number): StreamObject | undefined {
    if (this.tangled) return undefined
    let lexer = new Lexer(this.bytes, at, at + this.budget, true)
    try {
      const skimmed = new Parser(lexer)
      skimmed.value()
      if (!skimmed.stream) return undefined
      this.budget -= lexer.at - at
      lexer = new Lexer(this.bytes, at, at + this.budget, false)
      const parser = new Parser(lexer)
      parser.value()
      return parser.stream
    } catch (error) {
      return this.failed(error)
    } finally {
      this.budget -= lexer.at - at
    }
  }

  /** `count` objects from `at`, as pdf.js's parser reads them one after another, if each is an integer. */
  integers(at: number, count: number): number[] | undefined {
    if (this.tangled) return undefined
    const lexer = new Lexer(this.bytes, at, at + this.budget, true)
    try {
      const parser = new Parser(lexer)
      const values: number[] = []
      while (values.length < count) {
        const value = parser.value()
        if (typeof value !== 'number' || !Number.isInteger(value)) return undefined
        values.push(value)
      }
      return values
    } catch (error) {
      return this.failed(error)
    } finally {
      this.budget -= lexer.at - at
    }
  }

  private failed(error: unknown): undefined {
    if (error instanceof Tangled) this.tangled = true
    else if (!(error instanceof Unreadable)) throw error
    return undefined
  }
}

/** Adds `stream` to the dictionaries read for its keyword. */
export function addStream(byKeyword: Map<number, PdfDict[]>, { keyword, dictionary }: StreamObject): void {
  const readings = byKeyword.get(keyword)
  if (readings) readings.push(dictionary)
  else byKeyword.set(keyword, [dictionary])
}

/**
 * The dictionary of every stream pdf.js could read, from every object header (`n g obj`) in the
 * file. pdf.js starts an object wherever the cross-reference table (or its repair, which scans the
 * file) says, so a header written inside another object's string or comment is read from too:
 * where two headers read to the same `stream` keyword with different dictionaries, both count.
 */
export function readStreamDictionaries(file: Buffer, reader = new ObjectReader(file)): StreamDictionaries {
  const byKeyword = new Map<number, PdfDict[]>()
  for (let at = file.indexOf('obj', 0, 'latin1'); at >= 0; at = file.indexOf('obj', at + 3, 'latin1')) {
    // The `obj` command: a token of its own, after a delimiter, white space or a number's last
    // byte (pdf.js reads `0-obj` as 0 then obj: a minus inside a number is skipped).
    const before = at > 0 ? file[at - 1]! : 0x20
    const after = at + 3 < file.length ? file[at + 3]! : 0x20
    if (!special(after) || (!special(before) && !digit(before) && before !== 0x2e && before !== 0x2d && before >= 0x20 && before <= 0x7f)) continue
    const stream = reader.streamAt(at + 3)
    if (reader.tangled) return { byKeyword, tangled: true }
    if (stream) addStream(byKeyword, stream)
  }
  return { byKeyword, tangled: false }
}

/**
 * Where pdf.js reads an object stream's objects (XRef.fetchCompressed): /N pairs (object number,
 * offset) read from its data's start, then each object at that start + /First + offset, in the
 * same bytes: the decoded data, or, for a stream with no filter, the file itself, anywhere in it.
 */
export interface Objects {
  count: number
  first: number
}

/** /N and /First when pdf.js can use them (direct integers); undefined when not known here (by reference) or unusable. */
export function objectsOf(dictionary: PdfDict): Objects | undefined {
  const count = dictionary.get('N')
  const first = dictionary.get('First')
  return typeof count === 'number' && Number.isInteger(count) && typeof first === 'number' && Number.isInteger(first) ? { count, first } : undefined
}

/**
 * The streams among an object stream's objects, its data at `start` in `bytes`: each read from
 * where pdf.js starts it, to no end (pdf.js ends each at the next one's offset, where a stream it
 * reads must have ended too, `endstream` and all). None when a pair is no integer: pdf.js then
 * reads none. An offset out of the bytes reads nothing, as in pdf.js (a position before the
 * start reads as a command).
 */
export function readObjects(reader: ObjectReader, bytes: Buffer, start: number, { count, first }: Objects): StreamObject[] {
  const streams: StreamObject[] = []
  // No `stream` keyword, no stream (a legitimate object stream's data holds none: nothing to read).
  if (bytes.indexOf('stream', 0, 'latin1') < 0) return streams
  const pairs = reader.integers(start, 2 * count)
  const seen = new Set<number>()
  for (let index = 1; pairs && index < pairs.length; index += 2) {
    const at = start + first + pairs[index]!
    if (at < 0 || at >= bytes.length || seen.has(at)) continue
    seen.add(at)
    const stream = reader.streamAt(at)
    if (stream) streams.push(stream)
  }
  return streams
}

/**
 * `readings` with the streams of the object streams among them whose data is the bytes read
 * (`storedHere` gives its data's start and /N and /First, or undefined for an object stream whose
 * data is decoded), in turn with those such streams store: an object stream with no filter is read
 * from the same bytes, where its header says, its objects anywhere in them. One whose /N or
 * /First is not known here may start an object anywhere: every dictionary is then uncertain.
 */
export function withStoredObjects(bytes: Buffer, readings: StreamDictionaries, reader: ObjectReader, storedHere: (stream: StreamObject) => { start: number; objects: Objects | undefined } | undefined): StreamDictionaries {
  const { byKeyword } = readings
  const queue: StreamObject[] = [...byKeyword].flatMap(([keyword, dictionaries]) => dictionaries.map(dictionary => ({ keyword, dictionary })))
  const done = new Set<string>()
  for (let stream = queue.pop(); stream && !readings.tangled; stream = queue.pop()) {
    const stored = storedHere(stream)
    if (!stored) continue
    if (!stored.objects) return { byKeyword, tangled: true }
    const key = `${stored.start} ${stored.objects.first} ${stored.objects.count}`
    if (done.has(key)) continue
    done.add(key)
    for (const object of readObjects(reader, bytes, stored.start, stored.objects)) {
      addStream(byKeyword, object)
      queue.push(object)
    }
    if (reader.tangled) return { byKeyword, tangled: true }
  }
  return readings
}
