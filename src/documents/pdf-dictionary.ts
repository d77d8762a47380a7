// PDF objects read as pdf.js reads them (its Lexer and Parser, src/core/parser.js), for one purpose:
// to know, for every `stream` keyword in a file, the dictionary pdf.js gives that stream, so the
// prescan (pdf-streams.ts) decodes it with the filters pdf.js will apply. Reading a dictionary as
// text misled the count: a key inside a nested dictionary or a string, a repeated key (pdf.js keeps
// the last), a name written with #-escapes, a filter given by reference (regression QA).

export class Name {
  constructor(readonly name: string) {}
}
export class Ref {
  constructor(readonly num: number, readonly gen: number) {}
}
class Cmd {
  constructor(readonly cmd: string) {}
}
/** A string's content plays no part in which filters apply: all strings are this one value. */
export const STRING = Symbol('string')
export type PdfDict = Map<string, PdfValue>
export type PdfValue = number | boolean | null | typeof STRING | Name | Ref | Cmd | PdfValue[] | PdfDict

const EOF = Symbol('eof')
/** Every name when only an object's extent is wanted, not its values (Lexer.skim). */
const SKIMMED = new Name('')
const EMPTY: PdfDict = new Map()
type Token = PdfValue | typeof EOF

/** Where pdf.js gives up on an object (it throws, and the object is not read). */
export class Unreadable extends Error {}
/** Where this reading cannot follow pdf.js (an inline image, a stream nested in an object): nothing it says is trusted. */
export class Tangled extends Error {}

// pdf.js's specialChars: 1 white space, 2 a delimiter.
const SPECIAL = new Uint8Array(256)
for (const byte of [0x00, 0x09, 0x0a, 0x0c, 0x0d, 0x20]) SPECIAL[byte] = 1
for (const byte of [0x25, 0x28, 0x29, 0x2f, 0x3c, 0x3e, 0x5b, 0x5d, 0x7b, 0x7d]) SPECIAL[byte] = 2
export const special = (byte: number) => byte >= 0 && SPECIAL[byte] !== 0
const white4 = (byte: number) => byte === 0x20 || byte === 0x09 || byte === 0x0d || byte === 0x0a // pdf.js's isWhiteSpace
export const digit = (byte: number) => byte >= 0x30 && byte <= 0x39
function hexValue(byte: number): number {
  if (digit(byte)) return byte & 0x0f
  return (byte >= 0x41 && byte <= 0x46) || (byte >= 0x61 && byte <= 0x66) ? (byte & 0x0f) + 9 : -1
}

// The commands the parser acts on, one object each, compared by identity; any other (`obj`,
// `endobj`, a stray word) is OTHER: pdf.js only ever passes it on as a value.
const [OPEN, CLOSE, GREATER, LEFT, RIGHT, REF, STREAM, ID, BI, OTHER] = ['<<', '>>', '>', '[', ']', 'R', 'stream', 'ID', 'BI', ''].map(text => new Cmd(text)) as [Cmd, Cmd, Cmd, Cmd, Cmd, Cmd, Cmd, Cmd, Cmd, Cmd]
const BRACKETS: Record<number, Cmd> = { 0x5b: LEFT, 0x5d: RIGHT, 0x7b: OTHER, 0x7d: OTHER }
const WORDS: Array<[string, Token]> = [['R', REF], ['stream', STREAM], ['ID', ID], ['BI', BI], ['true', true], ['false', false], ['null', null]]

/** pdf.js's Lexer.getObj, byte for byte where it decides a token's extent. `at` is its currentChar. */
export class Lexer {
  at: number
  /** Where the last token began. */
  start = 0
  constructor(private readonly bytes: Uint8Array, start: number, private readonly limit: number, readonly skim: boolean) {
    this.at = start
  }
  private get current(): number {
    return this.bytes[this.at] ?? -1
  }
  private next(): number {
    if (this.at < this.bytes.length) this.at++
    return this.bytes[this.at] ?? -1
  }

  token(): Token {
    if (this.at > this.limit) throw new Tangled() // the reading budget (ObjectReader)
    let ch = this.current
    for (let comment = false; ; ch = this.next()) {
      if (ch < 0) return EOF
      if (comment) comment = ch !== 0x0a && ch !== 0x0d
      else if (ch === 0x25) comment = true
      else if (SPECIAL[ch] !== 1) break
    }
    this.start = this.at
    if (digit(ch) || ch === 0x2b || ch === 0x2d || ch === 0x2e) return this.number(ch)
    switch (ch) {
      case 0x28: return this.string()
      case 0x2f: return this.name()
      case 0x5b: case 0x5d: case 0x7b: case 0x7d:
        this.next()
        return BRACKETS[ch]!
      case 0x3c:
        if (this.next() === 0x3c) {
          this.next()
          return OPEN
        }
        // A hex string runs to the first `>`, whatever else it holds.
        while ((ch = this.current) >= 0 && ch !== 0x3e) this.next()
        if (ch === 0x3e) this.next()
        return STRING
      case 0x3e:
        if (this.next() === 0x3e) {
          this.next()
          return CLOSE
        }
        return GREATER
      case 0x29:
        throw new Unreadable()
    }
    // A command: a run of regular bytes (a byte outside 0x20-0x7f before a printable one stands alone).
    const start = this.at
    if ((ch < 0x20 || ch > 0x7f) && this.at + 1 < this.bytes.length && this.bytes[this.at + 1]! >= 0x20 && this.bytes[this.at + 1]! <= 0x7f) {
      this.next()
      return OTHER
    }
    while ((ch = this.next()) >= 0 && !special(ch)) if (this.at - start >= 128) throw new Unreadable()
    const length = this.at - start
    for (const [text, value] of WORDS) if (text.length === length && this.spells(start, text)) return value
    return OTHER
  }

  private spells(start: number, text: string): boolean {
    for (let index = 0; index < text.length; index++) if (this.bytes[start + index] !== text.charCodeAt(index)) return false
    return true
  }

  private number(ch: number): number {
    let sign = 1
    let divideBy = 0
    if (ch === 0x2d) {
      sign = -1
      if ((ch = this.next()) === 0x2d) ch = this.next()
    } else if (ch === 0x2b) ch = this.next()
    while (ch === 0x0a || ch === 0x0d) ch = this.next()
    if (ch === 0x2e) {
      divideBy = 10
      ch = this.next()
    }
    if (!digit(ch)) {
      if (white4(ch) || ch === 0x28 || ch === 0x3c || ch === -1) return 0
      throw new Unreadable()
    }
    let value = ch - 0x30
    while ((ch = this.next()) >= 0) {
      if (digit(ch)) {
        if (divideBy !== 0) divideBy *= 10
        value = value * 10 + ch - 0x30
      } else if (ch === 0x2e) {
        if (divideBy !== 0) break
        divideBy = 1
      } else if (ch !== 0x2d) break // a minus sign inside a number is skipped
    }
    return sign * (divideBy !== 0 ? value / divideBy : value)
  }

  /** A literal string: nested parentheses balance, `\` escapes one byte or up to three octal digits. */
  private string(): typeof STRING {
    let open = 1
    let ch = this.next()
    for (;;) {
      let buffered = false
      if (ch < 0) return STRING
      if (ch === 0x28) open++
      else if (ch === 0x29) {
        if (--open === 0) {
          this.next()
          return STRING
        }
      } else if (ch === 0x5c) {
        ch = this.next()
        if (ch < 0) return STRING
        if (ch >= 0x30 && ch <= 0x37) {
          ch = this.next()
          buffered = true
          if (ch >= 0x30 && ch <= 0x37) {
            ch = this.next()
            if (ch >= 0x30 && ch <= 0x37) buffered = false
          }
        } else if (ch === 0x0d && this.at + 1 < this.bytes.length && this.bytes[this.at + 1] === 0x0a) this.next()
      }
      if (!buffered) ch = this.next()
    }
  }

  /** A name, its #xx escapes decoded as pdf.js decodes them (a malformed one kept as written). */
  private name(): Name {
    // A name ends at the first special byte: no #-escape takes one in. Most have no #: read at once.
    const { bytes } = this
    let end = this.at + 1
    let text = ''
    if (this.skim) {
      while (end < bytes.length && SPECIAL[bytes[end]!] === 0) end++
      this.at = end
      return SKIMMED
    }
    for (; end < bytes.length && SPECIAL[bytes[end]!] === 0 && bytes[end] !== 0x23; end++) text += String.fromCharCode(bytes[end]!)
    this.at = end - 1
    let ch: number
    while ((ch = this.next()) >= 0 && !special(ch)) {
      if (ch !== 0x23) {
        text += String.fromCharCode(ch)
        continue
      }
      ch = this.next()
      if (special(ch)) {
        text += '#'
        break
      }
      const high = hexValue(ch)
      if (high === -1) {
        text += `#${String.fromCharCode(ch < 0 ? 0xffff : ch)}`
        continue
      }
      const first = ch
      const low = hexValue((ch = this.next()))
      if (low !== -1) text += String.fromCharCode((high << 4) | low)
      else {
        text += `#${String.fromCharCode(first)}`
        if (special(ch)) break
        text += String.fromCharCode(ch < 0 ? 0xffff : ch)
      }
    }
    return new Name(text)
  }
}

/** pdf.js's Parser.getObj over a Lexer: two tokens of lookahead, `n g R` a reference, the last of a repeated key kept. */
export class Parser {
  private buf1: Token
  private buf2: Token
  private at2 = 0
  /** The dictionary of a stream that ends this object, and where its `stream` keyword starts. */
  stream: { keyword: number; dictionary: PdfDict } | undefined

  constructor(private readonly lexer: Lexer) {
    this.buf1 = lexer.token()
    this.buf2 = lexer.token()
    this.at2 = lexer.start
  }
  private shift(): void {
    this.buf1 = this.buf2
    if (this.buf1 === ID) {
      this.buf2 = null
      return
    }
    this.buf2 = this.lexer.token()
    this.at2 = this.lexer.start
  }

  value(depth = 0): PdfValue {
    if (depth > 1000) throw new Tangled()
    const buf1 = this.buf1
    this.shift()
    if (buf1 === EOF) return null
    if (buf1 instanceof Cmd) {
      if (buf1 === BI) throw new Tangled()
      const skim = this.lexer.skim
      if (buf1 === LEFT) {
        const array: PdfValue[] = []
        while (this.buf1 !== RIGHT && this.buf1 !== EOF) {
          const value = this.value(depth + 1)
          if (!skim) array.push(value)
        }
        if (this.buf1 === EOF) throw new Unreadable()
        this.shift()
        return array
      }
      if (buf1 !== OPEN) return buf1
      const dictionary: PdfDict = skim ? EMPTY : new Map()
      while (this.buf1 !== CLOSE && this.buf1 !== EOF) {
        if (!(this.buf1 instanceof Name)) {
          this.shift() // pdf.js: "Malformed dictionary: key must be a name object", skipped
          continue
        }
        const key = this.buf1.name
        this.shift()
        if ((this.buf1 as Token) === EOF) break
        const value = this.value(depth + 1)
        if (dictionary !== EMPTY) dictionary.set(key, value)
      }
      if (this.buf1 === EOF) throw new Unreadable()
      if (this.buf2 === STREAM) {
        // pdf.js makes a stream here, then reads on past its data: only an object's own stream is followed.
        if (depth > 0) throw new Tangled()
        this.stream = { keyword: this.at2, dictionary }
        return dictionary
      }
      this.shift()
      return dictionary
    }
    if (typeof buf1 === 'number' && Number.isInteger(buf1) && typeof this.buf1 === 'number' && Number.isInteger(this.buf1) && this.buf2 === REF) {
      const ref = new Ref(buf1, this.buf1)
      this.shift()
      this.shift()
      return ref
    }
    return buf1
  }
}
