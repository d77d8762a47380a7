// SheetJS 0.20.3's reading of a BIFF8 formula, step for step, to find the one place it never
// ends: a formula's RgbExtra (MS-XLS 2.5.198.103, the bytes after its token array) holds, for each
// PtgMemArea token, a 2-byte count of the 8-byte ranges that follow (PtgExtraMem). SheetJS reads
// the count with `read_shift(2)`, which past the record's end is NaN, and loops
// `for(i = 0; i != count; ++i)` pushing a range each turn: ~1.5 GB in 2 s from a 4 KB upload.
// Knowing where that count lies takes walking every token before it exactly as parse_Rgce does
// (its sizes are SheetJS's, not the spec's where they differ), then each earlier token's extra as
// parse_RgbExtra does. Where SheetJS throws instead (a short PtgNum, a bad array value, a token
// whose extra it does not support), it never reaches a later count, and nothing is refused.

/**
 * A record's data as slurp() hands it to the record's parser: the record's own bytes followed by
 * those of the CONTINUE records after it, and where each piece starts (SheetJS's `lens`, which its
 * string reader checks: a string that reaches a piece's start reads a new 1-byte width flag there).
 */
export interface SlurpedRecord {
  data: Uint8Array
  starts: readonly number[]
}

/** How far a token reaches, from its first byte: a size, or a rule of its own. */
type Reach = number | 'rest' | 'string' | 'number' | 'choose'
/** What a token leaves for parse_RgbExtra: an array's values, a count of ranges, or a throw. */
type Extra = 'array' | 'memory' | 'unsupported'
interface Ptg {
  reach: Reach
  extra?: Extra
}

// PtgTypes, BIFF8 sizes. 'rest' is SheetJS's parsenoop(blob, length): the token takes the rest of
// the token array (PtgTbl, PtgMemErr, PtgMemNoMem).
const PTG = new Map<number, Ptg>([
  [0x01, { reach: 5 }], [0x02, { reach: 'rest' }], [0x17, { reach: 'string' }], [0x1a, { reach: 11 }], [0x1b, { reach: 5 }],
  [0x1c, { reach: 2 }], [0x1d, { reach: 2 }], [0x1e, { reach: 3 }], [0x1f, { reach: 'number' }], [0x20, { reach: 8, extra: 'array' }],
  [0x21, { reach: 3 }], [0x22, { reach: 4 }], [0x23, { reach: 5 }], [0x24, { reach: 5 }], [0x25, { reach: 9 }],
  [0x26, { reach: 7, extra: 'memory' }], [0x27, { reach: 'rest' }], [0x28, { reach: 'rest' }], [0x29, { reach: 3 }], [0x2a, { reach: 5 }],
  [0x2b, { reach: 9 }], [0x2c, { reach: 5 }], [0x2d, { reach: 9 }], [0x2e, { reach: 3 }], [0x2f, { reach: 3 }],
  [0x39, { reach: 7 }], [0x3a, { reach: 7 }], [0x3b, { reach: 11 }], [0x3c, { reach: 7 }], [0x3d, { reach: 11 }],
])
// The operators, one byte each.
for (let id = 0x03; id <= 0x16; id++) PTG.set(id, { reach: 1 })
// PtgDupes: the value (0x40) and array (0x60) classes of the reference tokens, and SheetJS's few others.
for (let id = 0x20; id <= 0x2f; id++) {
  PTG.set(id + 0x20, PTG.get(id)!)
  PTG.set(id + 0x40, PTG.get(id)!)
}
for (const [dupe, id] of [[0x58, 0x22], [0x78, 0x22], [0x59, 0x39], [0x79, 0x39], [0x5a, 0x3a], [0x7a, 0x3a], [0x5b, 0x3b], [0x7b, 0x3b], [0x5c, 0x3c], [0x7c, 0x3c], [0x5d, 0x3d], [0x7d, 0x3d]] as const) {
  PTG.set(dupe, PTG.get(id)!)
}
// Ptg18 and Ptg19, chosen by the byte after 0x18 or 0x19. PtgList and three PtgElf tokens make
// parse_RgbExtra throw ("Unsupported"); tAttrChoose carries its jump table.
const PTG18 = new Map<number, Ptg>([
  [0x01, { reach: 6 }], [0x02, { reach: 6 }], [0x03, { reach: 6 }], [0x06, { reach: 6 }], [0x07, { reach: 6 }], [0x0a, { reach: 6 }],
  [0x0b, { reach: 6, extra: 'unsupported' }], [0x0d, { reach: 6, extra: 'unsupported' }], [0x0f, { reach: 6, extra: 'unsupported' }],
  [0x10, { reach: 6 }], [0x19, { reach: 14, extra: 'unsupported' }], [0x1d, { reach: 6 }],
])
const PTG19 = new Map<number, Ptg>([
  [0x00, { reach: 4 }], [0x01, { reach: 4 }], [0x02, { reach: 4 }], [0x04, { reach: 'choose' }], [0x08, { reach: 4 }], [0x10, { reach: 4 }],
  [0x20, { reach: 4 }], [0x21, { reach: 4 }], [0x40, { reach: 4 }], [0x41, { reach: 4 }], [0x80, { reach: 4 }],
])

/** SheetJS throws here: nothing after is read. */
const THROWS = Symbol('throws')
/** SheetJS never finishes here, or keeps ranges read past the record (memory without a bound in the file). */
const LOOPS = Symbol('loops')

export const FORMULA = 0x0006
export const NAME = 0x0018
export const ARRAY = 0x0221
export const SHARED_FORMULA = 0x04bc
/** The records whose formulas SheetJS parses in a BIFF8 stream: BIFF2's ARRAY and BIFF3's NAME alike. */
export const FORMULA_RECORDS: ReadonlySet<number> = new Set([FORMULA, NAME, 0x0218, ARRAY, 0x0021, SHARED_FORMULA])

/**
 * Whether SheetJS, reading this record of a BIFF8 stream (`type` one of FORMULA_RECORDS), would
 * loop for ever on its formula.
 */
export function formulaLoops(type: number, record: SlurpedRecord): boolean {
  const walk = new FormulaWalk(record)
  try {
    if (type === FORMULA) walk.formula()
    else if (type === SHARED_FORMULA) walk.shared()
    else if (type === ARRAY || type === 0x0021) walk.cellFormula(12, record.data.length - 12) // parse_Array: RefU, 6 reserved bytes
    else walk.name()
    return false
  } catch (stop) {
    if (stop === LOOPS) return true
    if (stop === THROWS) return false
    throw stop
  }
}

class FormulaWalk {
  private readonly data: Uint8Array
  private readonly starts: readonly number[]
  constructor(record: SlurpedRecord) {
    this.data = record.data
    this.starts = [...new Set(record.starts)].sort((a, b) => a - b)
  }

  /** A byte as SheetJS indexes its buffer: undefined past the end (and at NaN). */
  private byte(at: number): number | undefined {
    return Number.isInteger(at) && at >= 0 && at < this.data.length ? this.data[at] : undefined
  }
  /** read_shift(2): `b[i+1]*256 + b[i]`, NaN when either byte is missing. */
  private u16(at: number): number {
    const low = this.byte(at)
    const high = this.byte(at + 1)
    return low === undefined || high === undefined ? Number.NaN : low | (high << 8)
  }

  /** parse_Formula: cell (6), FormulaValue (8, but see below), flags (2), chn (4), then the formula. */
  formula(): void {
    let at = 6
    // parse_FormulaValue: a number (8 bytes, parse_Xnum throws under 8 left) unless bytes 6–7 are
    // 0xFFFF; then a type of 0–3 takes 8 bytes and any other takes none.
    if (this.u16(at + 6) !== 0xffff) {
      if (this.data.length - at < 8) throw THROWS
      at += 8
    } else if (this.byte(at)! <= 3) at += 8
    at += 6
    this.cellFormula(at, this.data.length - at)
  }

  /** parse_XLSCellParsedFormula and parse_ArrayParsedFormula: cce, rgce, and the extra whenever `length !== cce + 2` (even when it is negative). */
  cellFormula(at: number, length: number): void {
    const cce = this.u16(at)
    if (cce === 0xffff) return
    const { tokens, end } = this.rgce(at + 2, cce)
    if (length !== cce + 2) this.extra(end, tokens)
  }

  /** parse_ShrFmla: RefU (6), a reserved byte, cUse; parse_SharedParsedFormula reads the rgce before it checks cce for 0xFFFF. */
  shared(): void {
    const at = 8
    const cce = this.u16(at)
    const { tokens, end } = this.rgce(at + 2, cce)
    if (cce === 0xffff) return
    if (this.data.length - at !== cce + 2) this.extra(end, tokens)
  }

  /** parse_Lbl: flags (2), chKey, cch, cce (2), 2 reserved, itab (2), 4 reserved, the name, then the formula to the record's end. */
  name(): void {
    const cch = this.byte(3)
    const cce = this.u16(4)
    const high = this.byte(14)
    // parse_XLUnicodeStringNoCch: a width flag of 0 is one byte a character, anything else (even
    // none) two. A missing cch: read_shift(undefined) never ends for one byte a character, and
    // leaves the position NaN for two (the formula is then skipped).
    if (cch === undefined) {
      if (high === 0) throw LOOPS
      return
    }
    const at = this.chars(15, cch, high !== 0)
    const length = this.data.length - at
    if (length === 0 || cce === 0 || !(length > 0)) return
    const { tokens, end } = this.rgce(at, cce)
    if (end !== this.data.length) this.extra(end, tokens)
  }

  /**
   * parse_Rgce: tokens until the position is `start + cce` again. A token may run past that end
   * (or the record's): the walk goes on from there, and an id it has no parser for (any byte past
   * the record's end) sends the position back to the end, which ends it. Returns the tokens whose
   * extras parse_RgbExtra reads, in order, and where the extra starts (that end).
   */
  private rgce(start: number, cce: number): { tokens: Extra[]; end: number } {
    const end = start + cce
    // `while(target != blob.l)` with a NaN target (cce read past the end) never ends.
    if (Number.isNaN(end)) throw LOOPS
    const tokens: Extra[] = []
    let at = start
    while (at !== end) {
      const id = this.byte(at)
      const ptg = id === 0x18 || id === 0x19 ? (id === 0x18 ? PTG18 : PTG19).get(this.byte(at + 1) ?? -1) : PTG.get(id ?? -1)
      if (ptg === undefined) {
        at = end
        continue
      }
      if (ptg.extra !== undefined) tokens.push(ptg.extra)
      if (typeof ptg.reach === 'number') at += ptg.reach
      else if (ptg.reach === 'rest') at = end
      else if (ptg.reach === 'number') {
        // parse_Xnum throws when fewer than 8 bytes are left in the record.
        if (this.data.length - (at + 1) < 8) throw THROWS
        at += 9
      } else if (ptg.reach === 'choose') {
        // tAttrChoose: 2 bytes, a count less one, then that many + 1 2-byte offsets (none for NaN).
        const count = this.u16(at + 2)
        at += 4 + (Number.isNaN(count) ? 0 : 2 * (count + 1))
      } else {
        // PtgStr: cch, a width flag (nonzero: two bytes a character), the characters.
        const cch = this.byte(at + 1)
        const wide = this.byte(at + 2)
        at += 3
        if (cch) at = this.chars(at, cch, wide !== undefined && wide !== 0)
      }
    }
    return { tokens, end }
  }

  /** parse_RgbExtra: each token's extra in turn, from `at`. */
  private extra(at: number, tokens: readonly Extra[]): void {
    for (const token of tokens) {
      if (token === 'unsupported') throw THROWS
      if (token === 'memory') {
        // parse_PtgExtraMem: the count, then count × 8 bytes. The loop this module exists for.
        const count = this.u16(at)
        if (Number.isNaN(count)) throw LOOPS
        at += 2 + 8 * count
        // A count whose ranges run past the record does end, but SheetJS reads each missing range
        // as NaNs and keeps them: 100 NAME records of 65,535 took 1.2 GB from a 7 KB file. No
        // real record does it (the ranges are the record's own bytes): refused as the loop is.
        if (at > this.data.length) throw LOOPS
        continue
      }
      // parse_PtgExtraArray: columns less one (1 byte), rows less one (2), then rows × columns
      // values. Either count read past the end is NaN, and so is the first value's type: it throws.
      const columns = 1 + (this.byte(at) ?? Number.NaN)
      const rows = 1 + this.u16(at + 1)
      at += 3
      if (Number.isNaN(columns) || Number.isNaN(rows)) {
        this.value(at)
        return // Unreachable (the value throws); the walk cannot follow SheetJS, so nothing is refused.
      }
      for (let row = 0; row < rows; row++) for (let column = 0; column < columns; column++) at = this.value(at)
    }
  }

  /** parse_SerAr, BIFF8: a type byte, then 8 bytes, or an XLUnicodeString for a string. */
  private value(at: number): number {
    const type = this.byte(at)
    at += 1
    switch (type) {
      case 0x00: // nil
      case 0x04: // boolean
      case 0x10: // error
      case 0x25: // an error, as SheetJS reads it
        return at + 8
      case 0x01: // number: parse_Xnum throws when fewer than 8 bytes are left
        if (this.data.length - at < 8) throw THROWS
        return at + 8
      case 0x02: {
        // parse_XLUnicodeString: cch (2); 0 takes one more byte; else a width flag, the characters.
        const cch = this.u16(at)
        if (cch === 0) return at + 3
        const high = this.byte(at + 2)
        // A NaN cch: one byte a character never ends, two leave the position NaN (the next read
        // throws, or a PtgMemArea's count is NaN). cch is NaN only past the end, where the flag is too.
        if (Number.isNaN(cch)) {
          if (high === 0) throw LOOPS
          return Number.NaN
        }
        return this.chars(at + 3, cch, high !== 0)
      }
      default:
        throw THROWS // "Bad SerAr", as for any type read past the end
    }
  }

  /**
   * Where `count` characters from `at` end, as ReadShift's 'sbcs-cont' and 'dbcs-cont' read them:
   * a character that would start at a piece's start (a CONTINUE record's) reads the byte there as a
   * new width flag instead, and the rest are read from the byte after it.
   */
  private chars(at: number, count: number, wide: boolean): number {
    let step = wide ? 2 : 1
    let left = count
    for (;;) {
      const end = at + step * left
      const boundary = this.boundary(at, end, step)
      if (boundary === undefined) return end
      left -= (boundary - at) / step
      step = this.byte(boundary) ? 2 : 1
      at = boundary + 1
    }
  }

  /** The first piece start in [from, to) that a character read from `from` in steps of `step` lands on. */
  private boundary(from: number, to: number, step: number): number | undefined {
    let low = 0
    let high = this.starts.length
    while (low < high) {
      const middle = (low + high) >> 1
      if (this.starts[middle]! < from) low = middle + 1
      else high = middle
    }
    for (let index = low; index < this.starts.length && this.starts[index]! < to; index++) {
      if ((this.starts[index]! - from) % step === 0) return this.starts[index]
    }
    return undefined
  }
}
