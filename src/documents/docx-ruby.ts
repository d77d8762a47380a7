// The rubies open as the DOCX rewrite (docx-rewrite.ts) reads a part: a ruby is written as what its
// base shows, one text in the run holding it (the annotation, w:rt, is a reading, not the text).
// Its base's edits are discarded with it, so what its runs show is gathered here as it is read:
// their text, and a picture's alternative text, "[Image: …]" on a line of its own within it as
// elsewhere (docx-drawings.ts).

interface Ruby {
  /** The rewrite's edits made before it: those after are inside it, replaced by its text. */
  editsBefore: number
  inBase: boolean
  /** A picture's alternative text standing first in it goes on a line of its own: text precedes the ruby on its line. */
  lineBefore: boolean
  /** What its base shows so far. */
  text: string
  /** What its base shows ends with a picture's alternative text: text after it goes on the next line. */
  imageLast: boolean
}

/** What a ruby shows, as it ends. */
export interface RubyText {
  editsBefore: number
  text: string
  /** It ends with a picture's alternative text (as ImageLine in docx-rewrite-state.ts). */
  imageLast: boolean
}

export class OpenRubies {
  private readonly open: Ruby[] = []

  /** A w:ruby starts; `lineBefore`: its paragraph shows text on the line it starts on. */
  start(editsBefore: number, lineBefore: boolean): void {
    this.open.push({ editsBefore, inBase: false, lineBefore, text: '', imageLast: false })
  }

  /** The innermost ruby's w:rubyBase opens (true) or closes (false). */
  base(inBase: boolean): void {
    const ruby = this.open.at(-1)
    if (ruby) ruby.inBase = inBase
  }

  /** Whether what is read stands in the innermost ruby's base. */
  get inBase(): boolean {
    return this.open.at(-1)?.inBase ?? false
  }

  /** Text a shown run of the base shows. */
  text(text: string): void {
    const ruby = this.open.at(-1)
    if (ruby === undefined || text === '') return
    ruby.text += ruby.imageLast && !text.startsWith('\n') ? `\n${text}` : text
    ruby.imageLast = false
  }

  /** A shown picture's alternative text, read as "[Image: …]". */
  image(text: string): void {
    const ruby = this.open.at(-1)
    if (ruby === undefined) return
    const lineBefore = ruby.text === '' ? ruby.lineBefore : !ruby.text.endsWith('\n')
    ruby.text += `${lineBefore ? '\n' : ''}[Image: ${text}]`
    ruby.imageLast = true
  }

  /** The innermost ruby ends: what it shows. */
  end(): RubyText | undefined {
    return this.open.pop()
  }
}
