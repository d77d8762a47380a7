import { Ref, STRING, type PdfValue } from './pdf-dictionary'

// pdf.js's predictor stage (PredictorStream, src/core/predictor_stream.js), which a Flate or LZW
// filter gets when its /DecodeParms is a dictionary (Parser.makeFilter), as a size: what it writes
// for the decoder's output, and the work it does past that. Its output is not the decoder's: every
// row read, a partial last one too, writes a whole row of ceil(Columns × Colors × BPC / 8) bytes,
// so 50 bytes of Flate with /Columns 33554432 made pdf.js allocate ~90 MiB (QA), and a row reaches
// 256 MiB.

/** A predictor as pdf.js applies it: its row size as it computes it, and the work a row costs past writing it. */
export interface Predictor {
  png: boolean
  rowBytes: number
  /** Loop iterations a row costs past its rowBytes (a tiny /Columns with many /Colors loops over the colours). */
  excess: number
}

/**
 * The predictor pdf.js applies with these parameters (one filter's /DecodeParms entry), null for
 * none (no dictionary, /Predictor 1 or less, or one it refuses, where the stream reads as empty),
 * or undefined where the prescan cannot see a value (a reference, a string's content): then the
 * row size is unknown and the stage is not modelled.
 */
export function predictorOf(params: PdfValue | undefined): Predictor | null | undefined {
  if (!(params instanceof Map)) return null
  const value = (key: string, alias?: string) => (alias && params.has(alias) ? params.get(alias) : params.get(key))
  const raw = value('Predictor')
  const predictor = effective(raw, 1)
  const colors = effective(value('Colors'), 1)
  const bits = effective(value('BitsPerComponent', 'BPC'), 8)
  const columns = effective(value('Columns'), 1)
  if (predictor === undefined) return undefined
  if (predictor.number <= 1) return null
  const tiff = predictor.exact && predictor.number === 2
  if (!tiff && (predictor.number < 10 || predictor.number > 15)) return null // FormatError: the filter reads as an empty stream
  if (colors === undefined || bits === undefined || columns === undefined) return undefined
  // As pdf.js computes them, `>> 3` wrapping the product to 32 bits.
  const rowBytes = (columns.number * colors.number * bits.number + 7) >> 3
  const pixBytes = (colors.number * bits.number + 7) >> 3
  const count = (n: number) => (n > 0 ? Math.ceil(n) : 0) // iterations of `for (i = 0; i < n; i++)`
  let work: number
  if (!tiff) work = Math.max(rowBytes, pixBytes) // the Sub, Average and Paeth types loop over pixBytes first
  else if (bits.exact && colors.exact && bits.number === 1 && colors.number === 1) work = rowBytes
  else if (bits.exact && bits.number === 8) work = Math.max(count(colors.number), rowBytes)
  else if (bits.exact && bits.number === 16) work = Math.max(count(2 * colors.number), rowBytes)
  else work = count(columns.number) * count(colors.number) + count(colors.number) + 1 // per pixel and colour, and a colours buffer
  return { png: !tiff, rowBytes, excess: Math.max(0, work - Math.max(0, rowBytes)) }
}

/**
 * What the stage writes for `size` bytes of decoded data, and its work past that. A PNG row reads
 * its type byte and rowBytes more, a TIFF row rowBytes; either writes a whole row whenever any byte
 * of it was read. A row of 0 bytes reads all the data in one go (getBytes(0)), a negative one none.
 */
export function predicted(predictor: Predictor, size: number): { size: number; work: number } {
  const { png, rowBytes, excess } = predictor
  const rows = rowBytes > 0 ? (png ? Math.max(0, Math.ceil((size - 1) / (rowBytes + 1))) : Math.ceil(size / rowBytes)) : rowBytes === 0 && size > (png ? 1 : 0) ? 1 : 0
  return { size: rows * Math.max(0, rowBytes), work: rows * excess }
}

/**
 * A parameter as pdf.js uses it: `dict.get(key) || fallback`, then JavaScript's arithmetic on it
 * (`exact`: a number, for its `=== 8` tests). Undefined: a reference (pdf.js resolves it) or a
 * string, whose value the prescan does not see.
 */
function effective(value: PdfValue | undefined, fallback: number): { number: number; exact: boolean } | undefined {
  if (value === undefined || value === null || value === false || (typeof value === 'number' && !value)) return { number: fallback, exact: true }
  if (typeof value === 'number') return { number: value, exact: true }
  if (value instanceof Ref) return undefined
  const number = toNumber(value)
  return number === undefined ? undefined : { number, exact: false }
}

/** JavaScript's ToNumber of a pdf.js value: an array by its text (elements joined with commas; a reference inside one stays one, "5R"), any other object NaN. */
function toNumber(value: PdfValue | undefined): number | undefined {
  if (value === true) return 1
  if (value === STRING) return undefined
  if (!Array.isArray(value)) return Number.NaN // a name, a dictionary, a command
  if (value.length === 0) return 0
  if (value.length > 1) return Number.NaN
  const [only] = value
  if (only === null || only === undefined) return 0
  if (typeof only === 'number') return only
  if (only === STRING) return undefined
  if (Array.isArray(only)) return toNumber(only)
  return Number.NaN // "true", "[object Object]", "5R"
}
