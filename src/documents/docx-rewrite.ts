import { hiddenByStyles, on, scanWord, take, type Budget, type HiddenStyles } from './docx-styles'

// What officeparser 8.1.1's run loop (WordParser.js, processChildNode) loses or garbles in a Word
// document, rewritten before it reads the package into forms it reads right: a non-breaking hyphen
// and a symbol (w:sym) as text, a page or column break between words as a line break, an absolute
// position tab (w:ptab) as a tab, a ruby as its base text, a legacy form checkbox as ☒ or ☐; and left
// out, what Word does not show: hidden text (w:vanish, set on the run or by its styles) and a content
// control's placeholder ("Click or tap here to enter text."). Hidden text is a prompt-injection
// vector, as hidden HTML is (web pages' hidden elements are left out too).
//
// Only the elements concerned are touched: each is replaced where it stands in the part's text, the
// rest copied as it is. No replacement holds more elements than what it replaces, so the document
// stays within MAX_XML_ELEMENTS; nor, save for text the decoding itself changed (invalid UTF-8 read
// as U+FFFD, as officeparser reads it) or an odd mix of prefixes, more bytes: docx-package.ts checks
// the inflated size again.
// Names are WordprocessingML's by namespace, whatever the prefix (docx-styles.ts scanWord), and what
// is written in an element's place takes its prefix.

/**
 * Adobe's Symbol font encoding (unicode.org, VENDORS/ADOBE/symbol.txt), 0x20–0x7E then 0xA0–0xFE;
 * "\uFFFD" where it has no character a reader needs: the radical extender (0x60) and the pieces of
 * large brackets, braces, integrals and arrows it maps to the private use area. Greek capitals and
 * mu as Greek letters (Δ, Ω, μ; the table also gives ∆, Ω, µ), the serif and sans-serif ®, © and ™
 * as the signs themselves.
 */
const SYMBOL_LOW = ' !∀#∃%&∋()∗+,−./0123456789:;<=>?≅ΑΒΧΔΕΦΓΗΙϑΚΛΜΝΟΠΘΡΣΤΥςΩΞΨΖ[∴]⊥_\uFFFDαβχδεφγηιϕκλμνοπθρστυϖωξψζ{|}∼'
const SYMBOL_HIGH = '€ϒ′≤⁄∞ƒ♣♦♥♠↔←↑→↓°±″≥×∝∂•÷≠≡≈…\uFFFD\uFFFD↵ℵℑℜ℘⊗⊕∅∩∪⊃⊇⊄⊂⊆∈∉∠∇®©™∏√⋅¬∧∨⇔⇐⇑⇒⇓◊〈®©™∑\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD〉∫⌠\uFFFD⌡\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD'

/**
 * The text of `<w:sym w:font w:char>`: a Symbol-font character (F020–F0FF, as Word writes it, or
 * 0020–00FF) through Adobe's table; another font's character as it is, unless it is in the range
 * F000–F0FF, where Word puts a symbol font's own codes (Wingdings' and the like: no Unicode meaning).
 */
export function symbolText(font: string | undefined, char: string | undefined): string {
  if (char === undefined || !/^[0-9A-Fa-f]{1,4}$/.test(char)) return ''
  const code = Number.parseInt(char, 16)
  const byte = code & 0xff
  if (font?.trim().toLowerCase() === 'symbol' && (code >> 8 === 0xf0 || code >> 8 === 0) && byte >= 0x20) {
    const shown = byte < 0x7f ? SYMBOL_LOW[byte - 0x20] : byte >= 0xa0 && byte < 0xff ? SYMBOL_HIGH[byte - 0xa0] : undefined
    return shown === undefined || shown === '\uFFFD' ? '' : shown
  }
  if (code >> 8 === 0xf0) return ''
  // Only characters XML allows in text.
  const allowed = code === 0x9 || code === 0xa || code === 0xd || (code >= 0x20 && code < 0xd800) || (code >= 0xe000 && code < 0xfffe)
  return allowed ? String.fromCharCode(code) : ''
}

const escapeText = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;')
/** The prefix `qname` is written with ("w:", ""): what the rewrite writes in its place takes it too. */
const prefixOf = (qname: string) => qname.slice(0, qname.indexOf(':') + 1)

/**
 * What a hidden run keeps: its properties, and what is not its text but marks where something
 * stands (fields' structure, whose begin and end must stay paired; note and comment references).
 */
const KEPT_IN_HIDDEN_RUN = new Set(['w:rPr', 'w:fldChar', 'w:instrText', 'w:delInstrText', 'w:footnoteReference', 'w:endnoteReference', 'w:commentReference', 'w:lastRenderedPageBreak'])
/** The elements that put text in a paragraph (a page break between two of them separates them). */
const TEXT = new Set(['w:t', 'w:tab', 'w:ptab', 'w:sym', 'w:noBreakHyphen', 'w:cr'])

interface Edit {
  start: number
  end: number
  text: string
  dead?: boolean
}
interface Paragraph {
  style?: string
  textSeen: boolean
  /** Page and column breaks after the paragraph's text, not yet followed by more of it. */
  breaks: Edit[]
}
interface Run {
  /** The edits made before the run: those after are inside it. */
  editsBefore: number
  paragraph?: Paragraph
  style?: string
  vanish?: boolean
  children: Array<{ name: string; start: number; end: number }>
}


/**
 * `xml` (a document, header, footer or notes part) with the elements officeparser mishandles
 * rewritten, as the pieces of its text in order; undefined when there is nothing to rewrite, or
 * the part is not well-formed (then nothing can be said of what it shows).
 */
export function rewritePart(xml: string, styles: HiddenStyles, budget: Budget = { left: Number.POSITIVE_INFINITY }): { pieces: string[] } | 'malformed' | undefined {
  const edits: Edit[] = []
  // Edits are made as elements end; an element's edit replaces those made inside it.
  const edit = (start: number, end: number, text: string) => {
    while (edits.length > 0 && edits.at(-1)!.start >= start) edits.pop()
    const made = { start, end, text }
    edits.push(made)
    return made
  }
  const open: Array<{ name: string; qname: string; attributes: Record<string, string> }> = []
  const paragraphs: Paragraph[] = []
  const runs: Run[] = []
  const placeholders: boolean[] = []
  let showingPlaceholder = 0
  const rubies: Array<{ editsBefore: number; inBase: boolean; content: string }> = []
  let checkBox: { checked?: boolean; byDefault?: boolean } | undefined
  /** A checkbox's form data, ended in its field's w:fldChar, which is open at depth `depth`. */
  let formData: { start: number; depth: number; checked: boolean } | undefined
  // The nearest setting decides: the run's own w:vanish, then its styles (hiddenByStyles).
  const runHidden = (run: Run) => showingPlaceholder > 0 || (run.vanish ?? hiddenByStyles(styles, run.style, run.paragraph?.style))
  /** What a run shows, its edits applied, without its properties: a ruby's base is read so. */
  const shown = (run: Run) => {
    let text = ''
    let next = run.editsBefore
    for (const child of run.children) {
      if (child.name === 'w:rPr') continue
      let at = child.start
      for (; next < edits.length && edits[next]!.start < child.end; next++) {
        const made = edits[next]!
        if (made.start < at || made.dead) continue
        text += xml.slice(at, made.start) + made.text
        at = made.end
      }
      text += xml.slice(at, child.end)
    }
    return text
  }

  const wellFormed = scanWord(
    xml,
    (name, attributes, _depth, _start, qname) => {
      take(budget)
      const [grand, parent] = [open.at(-2)?.name, open.at(-1)?.name]
      open.push({ name, qname, attributes })
      const paragraph = paragraphs.at(-1)
      // Only text that shows puts a page break between words (the run's properties come first in it).
      if (TEXT.has(name) || (name === 'w:br' && !['page', 'column'].includes(attributes['w:type'] ?? ''))) {
        const run = runs.at(-1)
        if (paragraph && !(run ? runHidden(run) : showingPlaceholder > 0)) {
          paragraph.textSeen = true
          paragraph.breaks.length = 0
        }
      }
      if (name === 'w:p') paragraphs.push({ textSeen: false, breaks: [] })
      else if (name === 'w:pStyle' && parent === 'w:pPr' && grand === 'w:p' && paragraph) paragraph.style = attributes['w:val']
      else if (name === 'w:r') runs.push({ editsBefore: edits.length, paragraph, children: [] })
      else if (name === 'w:rStyle' && parent === 'w:rPr' && grand === 'w:r' && runs.length > 0) runs.at(-1)!.style = attributes['w:val']
      else if (name === 'w:vanish' && parent === 'w:rPr' && grand === 'w:r' && runs.length > 0) runs.at(-1)!.vanish = on(attributes['w:val'])
      else if (name === 'w:sdt') placeholders.push(false)
      else if (name === 'w:showingPlcHdr' && parent === 'w:sdtPr' && grand === 'w:sdt' && on(attributes['w:val']) && placeholders.at(-1) === false) {
        placeholders[placeholders.length - 1] = true
        showingPlaceholder++
      } else if (name === 'w:ruby') rubies.push({ editsBefore: edits.length, inBase: false, content: '' })
      else if (name === 'w:rubyBase' && parent === 'w:ruby' && rubies.length > 0) rubies.at(-1)!.inBase = true
      else if (name === 'w:checkBox' && parent === 'w:ffData') checkBox = {}
      else if (name === 'w:checked' && parent === 'w:checkBox' && checkBox) checkBox.checked = on(attributes['w:val'])
      else if (name === 'w:default' && parent === 'w:checkBox' && checkBox) checkBox.byDefault = on(attributes['w:val'])
    },
    {
      onClose(name, start, end) {
        const { attributes, qname } = open.pop()!
        const prefix = prefixOf(qname)
        const parent = open.at(-1)?.name
        if (parent === 'w:r' && runs.length > 0) runs.at(-1)!.children.push({ name, start, end })
        if (name === 'w:noBreakHyphen') edit(start, end, `<${prefix}t>-</${prefix}t>`)
        else if (name === 'w:sym') {
          const text = symbolText(attributes['w:font'], attributes['w:char'])
          edit(start, end, text === '' ? '' : `<${prefix}t>${escapeText(text)}</${prefix}t>`)
        }
        else if (name === 'w:ptab') edit(start, end, `<${prefix}tab/>`)
        else if (name === 'w:br' && ['page', 'column'].includes(attributes['w:type'] ?? '')) {
          // Between the paragraph's words only: one before them or after them separates nothing.
          const paragraph = paragraphs.at(-1)
          if (paragraph?.textSeen) paragraph.breaks.push(edit(start, end, `<${prefix}br/>`))
        } else if (name === 'w:p') {
          for (const last of paragraphs.pop()?.breaks ?? []) last.dead = true
        } else if (name === 'w:r') {
          const run = runs.pop()!
          if (runHidden(run)) {
            edits.length = Math.min(edits.length, run.editsBefore)
            for (const child of run.children) if (!KEPT_IN_HIDDEN_RUN.has(child.name)) edit(child.start, child.end, '')
          } else if (rubies.at(-1)?.inBase) rubies.at(-1)!.content += shown(run)
        } else if (name === 'w:sdt') {
          if (placeholders.pop()) showingPlaceholder--
        } else if (name === 'w:rubyBase') {
          if (rubies.length > 0) rubies.at(-1)!.inBase = false
        } else if (name === 'w:ruby') {
          // What its base's runs show, in the run holding it: the annotation (w:rt, a reading) is not the text.
          const ruby = rubies.pop()!
          edits.length = Math.min(edits.length, ruby.editsBefore)
          edit(start, end, ruby.content)
        } else if (name === 'w:ffData') {
          if (checkBox && parent === 'w:fldChar') formData = { start, depth: open.length - 1, checked: checkBox.checked ?? checkBox.byDefault ?? false }
          checkBox = undefined
        } else if (name === 'w:fldChar' && formData?.depth === open.length) {
          // The form data goes, and the box, as it shows, follows the field's start in its run.
          edit(formData.start, end, `</${qname}><${prefix}t>${formData.checked ? '☒' : '☐'}</${prefix}t>`)
          formData = undefined
        }
      },
    },
  )
  if (!wellFormed) return 'malformed'
  const pieces: string[] = []
  let at = 0
  for (const made of edits) {
    if (made.dead) continue
    pieces.push(xml.slice(at, made.start), made.text)
    at = made.end
  }
  if (at === 0) return undefined
  pieces.push(xml.slice(at))
  return { pieces }
}
