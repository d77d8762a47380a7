// A key given twice in one mapping of the config file. YAML 1.2 requires unique keys, but
// Bun.YAML.parse, like JSON.parse, keeps the last of two silently: a model's second `price:` of
// "0" made it free. The `yaml` and `js-yaml` packages refuse duplicates, but loading either cost
// 7–14 MiB of resident memory for good (measured), a tenth of the gateway's budget under load.
//
// So this scan, over what config files are made of: block mappings and sequences, flow mappings
// and sequences (JSON included) over one or more lines, plain and quoted scalars, comments. On
// anything else (block scalars, anchors, aliases, tags, merge or explicit keys, directives, tabs
// in indentation) it stops and reports nothing: it never refuses a file for a reason of its own.

export interface DuplicateKey {
  readonly key: string
  /** 1-based, of the second occurrence. */
  readonly line: number
  readonly column: number
}

/** What the scan does not model: it ends with no finding. */
class Unmodelled extends Error {}

export function duplicateKey(source: string): DuplicateKey | undefined {
  const text = source.replace(/\r\n?/g, '\n')
  try {
    return new Scan(text).run()
  } catch (error) {
    if (error instanceof Unmodelled) return undefined
    throw error
  }
}

class Scan {
  private at = 0
  /** Only directives, comments and blank lines so far: a `---` here starts the one document. */
  private prologue = true
  /** The block mappings open at each indentation column, innermost last. */
  private readonly blocks: Array<{ column: number; keys: Set<string> }> = []

  constructor(private readonly text: string) {}

  run(): DuplicateKey | undefined {
    while (this.at < this.text.length) {
      const found = this.line()
      if (found !== undefined) return found
    }
    return undefined
  }

  /** One line in block context (a flow collection it opens may run over the next lines). */
  private line(): DuplicateKey | undefined {
    const { text } = this
    const lineStart = this.at
    while (text[this.at] === ' ') this.at++
    if (text[this.at] === '\t') throw new Unmodelled()
    // The prologue (%YAML and %TAG lines, then a bare `---`) holds no keys: QA, a `---` first
    // line turned the whole scan off, and a repeated plan or price went through.
    const rest = text.slice(this.at, this.lineEnd())
    if (this.prologue && this.at === lineStart && (/^%/.test(rest) || /^---\s*(#.*)?$/.test(rest))) {
      if (rest.startsWith('---')) this.prologue = false
      return this.nextLine()
    }
    if (!this.atLineEnd()) this.prologue = false
    if (this.at === lineStart && /^(---|\.\.\.)(\s|$)|^%/.test(text.slice(this.at, this.at + 4))) throw new Unmodelled()
    for (;;) {
      if (this.atLineEnd()) return this.nextLine()
      const column = this.at - lineStart
      // A sequence entry: what follows is a new node, deeper than the dash.
      if (text[this.at] === '-' && /[ \n]/.test(text[this.at + 1] ?? '\n')) {
        this.close(column)
        this.at++
        while (text[this.at] === ' ') this.at++
        continue
      }
      if (text[this.at] === '{' || text[this.at] === '[') {
        const found = this.flow()
        if (found !== undefined) return found
        if (!this.atLineEnd()) throw new Unmodelled()
        return this.nextLine()
      }
      const keyStart = this.at
      const key = this.blockKey()
      if (key === undefined) return this.nextLine() // a scalar (a sequence item, a continued plain scalar)
      this.close(column)
      const top = this.blocks.at(-1)
      if (top !== undefined && top.column === column) {
        if (top.keys.has(key)) return this.report(key, keyStart)
        top.keys.add(key)
      } else {
        this.blocks.push({ column, keys: new Set([key]) })
      }
      while (text[this.at] === ' ') this.at++
      if (/[|>&*!]/.test(text[this.at] ?? '')) throw new Unmodelled()
      if (text[this.at] === '"' || text[this.at] === "'") {
        this.quoted()
        if (!this.atLineEnd()) throw new Unmodelled()
        return this.nextLine()
      }
      if (text[this.at] !== '{' && text[this.at] !== '[') return this.nextLine()
    }
  }

  /** Closes the block mappings deeper than `column`. */
  private close(column: number): void {
    while ((this.blocks.at(-1)?.column ?? -1) > column) this.blocks.pop()
  }

  /** A block mapping's key here (consumed with its colon), or undefined for a scalar (not consumed). */
  private blockKey(): string | undefined {
    const { text } = this
    const start = this.at
    let key: string
    if (text[this.at] === '"' || text[this.at] === "'") {
      key = this.quoted()
      while (text[this.at] === ' ') this.at++
      if (text[this.at] !== ':' || !/[ \n]/.test(text[this.at + 1] ?? '\n')) {
        this.at = start
        return undefined
      }
    } else {
      // Up to the first colon followed by a space or the line's end (`base_url: http://x:80` is
      // the key base_url), unless a comment (` #`) or the line ends first: then a scalar.
      const line = text.slice(this.at, this.lineEnd())
      const colon = /:(?= |$)/.exec(line)
      const comment = line.indexOf(' #')
      if (colon === null || (comment !== -1 && comment < colon.index)) return undefined
      key = line.slice(0, colon.index).trimEnd()
      if (key === '' || key === '<<' || /^[?&*!|>%@`]/.test(key)) throw new Unmodelled()
      this.at += colon.index
    }
    this.at++ // the colon
    return key
  }

  /** A flow mapping or sequence from its opening bracket to past its closing one. */
  private flow(): DuplicateKey | undefined {
    const { text } = this
    const mapping = text[this.at++] === '{'
    const keys = new Set<string>()
    for (;;) {
      this.flowSpace()
      if (text[this.at] === (mapping ? '}' : ']')) {
        this.at++
        return undefined
      }
      if (mapping) {
        const keyStart = this.at
        const key = this.flowScalar()
        this.flowSpace()
        if (keys.has(key)) return this.report(key, keyStart)
        keys.add(key)
        if (text[this.at] === ':') {
          this.at++
          const found = this.flowValue()
          if (found !== undefined) return found
        }
      } else {
        const found = this.flowValue()
        if (found !== undefined) return found
        if (text[this.at] === ':') throw new Unmodelled() // a single-pair mapping inside a sequence
      }
      this.flowSpace()
      if (text[this.at] === ',') this.at++
      else if (text[this.at] !== (mapping ? '}' : ']')) throw new Unmodelled()
    }
  }

  private flowValue(): DuplicateKey | undefined {
    this.flowSpace()
    if (this.text[this.at] === '{' || this.text[this.at] === '[') return this.flow()
    this.flowScalar()
    this.flowSpace()
    return undefined
  }

  /** A scalar inside a flow collection: quoted, or plain up to an indicator that ends it. */
  private flowScalar(): string {
    const { text } = this
    if (text[this.at] === '"' || text[this.at] === "'") return this.quoted()
    const start = this.at
    if (/[&*!|>?%@`{[\]}]/.test(text[this.at] ?? '')) throw new Unmodelled()
    while (this.at < text.length) {
      const char = text[this.at]!
      if (char === ',' || char === '}' || char === ']' || char === '{' || char === '[') break
      if (char === ':' && /[ \n,}\]]/.test(text[this.at + 1] ?? '\n')) break
      if (char === '#' && /[ \n]/.test(text[this.at - 1] ?? '\n')) break
      this.at++
    }
    return text.slice(start, this.at).replace(/\s+/g, ' ').trim()
  }

  /** A quoted scalar's value (YAML's double-quoted escapes read as JSON's). */
  private quoted(): string {
    const { text } = this
    const quote = text[this.at]!
    const start = this.at++
    for (; this.at < text.length; this.at++) {
      if (quote === '"' && text[this.at] === '\\') this.at++
      else if (text[this.at] === quote) {
        if (quote === "'" && text[this.at + 1] === "'") this.at++
        else break
      }
    }
    if (this.at >= text.length) throw new Unmodelled()
    const raw = text.slice(start, ++this.at)
    if (quote === "'") return raw.slice(1, -1).replaceAll("''", "'")
    try {
      return JSON.parse(raw.replace(/\n\s*/g, ' ')) as string
    } catch {
      throw new Unmodelled()
    }
  }

  /** Spaces, line breaks and comments inside a flow collection. */
  private flowSpace(): void {
    const { text } = this
    for (;;) {
      while (/[ \n\t]/.test(text[this.at] ?? '')) this.at++
      if (text[this.at] !== '#') return
      this.at = this.lineEnd()
    }
  }

  private lineEnd(): number {
    const end = this.text.indexOf('\n', this.at)
    return end === -1 ? this.text.length : end
  }

  /** Only spaces, or a comment, left on this line. */
  private atLineEnd(): boolean {
    const { text } = this
    while (text[this.at] === ' ') this.at++
    return this.at >= text.length || text[this.at] === '\n' || (text[this.at] === '#' && (this.at === 0 || /[ \n]/.test(text[this.at - 1]!)))
  }

  private nextLine(): undefined {
    this.at = this.lineEnd() + 1
    return undefined
  }

  private report(key: string, offset: number): DuplicateKey {
    const before = this.text.slice(0, offset).split('\n')
    return { key, line: before.length, column: before.at(-1)!.length + 1 }
  }
}
