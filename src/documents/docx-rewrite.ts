import { scanXml } from './package-parts'
import { readSmallEntry, replaceEntries, type ZipEntry } from './zip-guard'

// What officeparser 8.1.1's run loop (WordParser.js, processChildNode) loses or garbles in a Word
// document, rewritten before it reads the package into forms it reads right: a non-breaking hyphen
// and a symbol (w:sym) as text, a page or column break between words as a line break, an absolute
// position tab (w:ptab) as a tab, a ruby as its base text, a legacy form checkbox as ☒ or ☐; and left
// out, what Word does not show: hidden text (w:vanish, set on the run or by its styles) and a content
// control's placeholder ("Click or tap here to enter text."). Hidden text is a prompt-injection
// vector, as hidden HTML is (web pages' hidden elements are left out too).
//
// Only the elements concerned are touched: each is replaced where it stands in the part's text, the
// rest copied as it is, so a part never grows (no replacement is longer than what it replaces, nor
// holds more elements) and the document stays within the caps it was checked against (the inflated
// size, MAX_XML_ELEMENTS). A part without any of these elements is not parsed, and a package without
// any such part is handed on as it came; one whose parts hold more elements than officeparser will
// read is handed on as it came too, for officeparser to refuse (it counts before it builds anything).

/** The parts officeparser reads blocks from that the layout shows: its own patterns (WordParser.js parseWord), unanchored as there. */
const READ_PARTS = [/word\/document[\d+]?.xml/, /word\/footnotes[\d+]?.xml/, /word\/endnotes[\d+]?.xml/, /word\/header\d*\.xml/, /word\/footer\d*\.xml/]
const STYLES_PART = /word\/styles[\d+]?.xml/
/** What a part must hold for the rewrite to have anything to do (hidden styles aside). */
const MARKERS = ['<w:noBreakHyphen', '<w:sym', '<w:br ', '<w:ptab', '<w:vanish', '<w:showingPlcHdr', '<w:ruby', '<w:checkBox'].map(marker => Buffer.from(marker))

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

/** Thrown once the parts read hold more elements than the budget: the rewrite stops there. */
class TooManyElements extends Error {}
/** What is left of the elements the rewrite may read. */
type Budget = { left: number }
const take = (budget: Budget) => {
  if (--budget.left < 0) throw new TooManyElements()
}

/** CT_OnOff: present without a value, or with any value but these, is on. */
const on = (value: string | undefined) => value === undefined || !['0', 'false', 'off'].includes(value)
const escapeText = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;')

/** Which styles hide their text (word/styles.xml): run properties with w:vanish, their own or through w:basedOn. */
export interface HiddenStyles {
  character: Set<string>
  paragraph: Set<string>
  /** The default paragraph style (a paragraph without w:pStyle has it), when it hides. */
  defaultParagraphHidden: boolean
  /** The document defaults' run properties hide (w:docDefaults). */
  defaultHidden: boolean
}

export function readHiddenStyles(xml: string | undefined, budget: Budget = { left: Number.POSITIVE_INFINITY }): HiddenStyles {
  const hidden: HiddenStyles = { character: new Set(), paragraph: new Set(), defaultParagraphHidden: false, defaultHidden: false }
  if (xml === undefined || !xml.includes('<w:vanish')) return hidden
  const styles = new Map<string, { type?: string; basedOn?: string; vanish?: boolean; isDefault: boolean }>()
  let style: { type?: string; basedOn?: string; vanish?: boolean; isDefault: boolean } | undefined
  const names: string[] = []
  scanXml(xml, (name, attributes, depth) => {
    take(budget)
    names.length = depth
    const [grand, parent] = [names[depth - 2], names[depth - 1]]
    names.push(name)
    if (name === 'w:style' && parent === 'w:styles') {
      style = { type: attributes['w:type'], isDefault: attributes['w:default'] !== undefined && on(attributes['w:default']) }
      styles.set(attributes['w:styleId'] ?? '', style)
    } else if (name === 'w:basedOn' && parent === 'w:style' && style) style.basedOn = attributes['w:val']
    else if (name === 'w:vanish' && parent === 'w:rPr' && grand === 'w:style' && style) style.vanish = on(attributes['w:val'])
    else if (name === 'w:vanish' && parent === 'w:rPr' && grand === 'w:rPrDefault') hidden.defaultHidden = on(attributes['w:val'])
  })
  for (const [id, own] of styles) {
    // The nearest style in the w:basedOn chain that sets w:vanish decides (a loop ends the chain).
    const seen = new Set<string>()
    let at: typeof own | undefined = own
    let key = id
    while (at && at.vanish === undefined && at.basedOn !== undefined && !seen.has(key)) {
      seen.add(key)
      key = at.basedOn
      at = styles.get(key)
    }
    if (at?.vanish !== true) continue
    if (own.type === 'character') hidden.character.add(id)
    if (own.type === 'paragraph') hidden.paragraph.add(id)
    if (own.type === 'paragraph' && own.isDefault) hidden.defaultParagraphHidden = true
  }
  return hidden
}

const anyHidden = (styles: HiddenStyles) => styles.character.size > 0 || styles.paragraph.size > 0 || styles.defaultParagraphHidden || styles.defaultHidden

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
  text: string
}

/**
 * `xml` (a document, header, footer or notes part) with the elements officeparser mishandles
 * rewritten, or undefined when there is nothing to rewrite or the part is not well-formed (it is
 * then left to officeparser as it is).
 */
export function rewritePart(xml: string, styles: HiddenStyles, budget: Budget = { left: Number.POSITIVE_INFINITY }): string | undefined {
  const edits: Edit[] = []
  // Edits are made as elements end; an element's edit replaces those made inside it.
  const edit = (start: number, end: number, text: string) => {
    while (edits.length > 0 && edits.at(-1)!.start >= start) edits.pop()
    const made = { start, end, text }
    edits.push(made)
    return made
  }
  const open: Array<{ name: string; attributes: Record<string, string> }> = []
  const paragraphs: Paragraph[] = []
  const runs: Run[] = []
  const placeholders: boolean[] = []
  let showingPlaceholder = 0
  const rubies: Array<{ editsBefore: number; inBase: boolean; text: string }> = []
  let checkBox: { checked?: boolean; byDefault?: boolean } | undefined
  /** A checkbox's form data, ended in its field's w:fldChar, which is open at depth `depth`. */
  let formData: { start: number; depth: number; checked: boolean } | undefined
  const runHidden = (run: Run) => {
    if (showingPlaceholder > 0) return true
    if (run.vanish !== undefined) return run.vanish
    const paragraphStyle = run.paragraph?.style
    const paragraphHidden = paragraphStyle === undefined ? styles.defaultParagraphHidden : styles.paragraph.has(paragraphStyle)
    // Either style hiding it hides it: the standard's toggle rule would show text both styles hide,
    // which errs toward reading what may be meant to be hidden.
    return (run.style !== undefined && styles.character.has(run.style)) || paragraphHidden || styles.defaultHidden
  }

  const wellFormed = scanXml(
    xml,
    (name, attributes) => {
      take(budget)
      const [grand, parent] = [open.at(-2)?.name, open.at(-1)?.name]
      open.push({ name, attributes })
      const paragraph = paragraphs.at(-1)
      if (TEXT.has(name) || (name === 'w:br' && !['page', 'column'].includes(attributes['w:type'] ?? ''))) {
        if (paragraph) {
          paragraph.textSeen = true
          paragraph.breaks.length = 0
        }
      }
      if (name === 'w:p') paragraphs.push({ textSeen: false, breaks: [] })
      else if (name === 'w:pStyle' && parent === 'w:pPr' && grand === 'w:p' && paragraph) paragraph.style = attributes['w:val']
      else if (name === 'w:r') runs.push({ editsBefore: edits.length, paragraph, children: [], text: '' })
      else if (name === 'w:rStyle' && parent === 'w:rPr' && grand === 'w:r' && runs.length > 0) runs.at(-1)!.style = attributes['w:val']
      else if (name === 'w:vanish' && parent === 'w:rPr' && grand === 'w:r' && runs.length > 0) runs.at(-1)!.vanish = on(attributes['w:val'])
      else if (name === 'w:sdt') placeholders.push(false)
      else if (name === 'w:showingPlcHdr' && parent === 'w:sdtPr' && grand === 'w:sdt' && on(attributes['w:val']) && placeholders.at(-1) === false) {
        placeholders[placeholders.length - 1] = true
        showingPlaceholder++
      } else if (name === 'w:ruby') rubies.push({ editsBefore: edits.length, inBase: false, text: '' })
      else if (name === 'w:rubyBase' && parent === 'w:ruby' && rubies.length > 0) rubies.at(-1)!.inBase = true
      else if (name === 'w:checkBox' && parent === 'w:ffData') checkBox = {}
      else if (name === 'w:checked' && parent === 'w:checkBox' && checkBox) checkBox.checked = on(attributes['w:val'])
      else if (name === 'w:default' && parent === 'w:checkBox' && checkBox) checkBox.byDefault = on(attributes['w:val'])
    },
    {
      onText(text) {
        const ruby = rubies.at(-1)
        if (ruby?.inBase && open.at(-1)?.name === 'w:t' && runs.length > 0) runs.at(-1)!.text += text
      },
      onClose(name, start, end) {
        const { attributes } = open.pop()!
        const parent = open.at(-1)?.name
        if (parent === 'w:r' && runs.length > 0) runs.at(-1)!.children.push({ name, start, end })
        if (name === 'w:noBreakHyphen') edit(start, end, '<w:t>-</w:t>')
        else if (name === 'w:sym') {
          const text = symbolText(attributes['w:font'], attributes['w:char'])
          edit(start, end, text === '' ? '' : `<w:t>${escapeText(text)}</w:t>`)
        }
        else if (name === 'w:ptab') edit(start, end, '<w:tab/>')
        else if (name === 'w:br' && ['page', 'column'].includes(attributes['w:type'] ?? '')) {
          // Between the paragraph's words only: one before them or after them separates nothing.
          const paragraph = paragraphs.at(-1)
          if (paragraph?.textSeen) paragraph.breaks.push(edit(start, end, '<w:br/>'))
        } else if (name === 'w:p') {
          for (const last of paragraphs.pop()?.breaks ?? []) last.dead = true
        } else if (name === 'w:r') {
          const run = runs.pop()!
          if (runHidden(run)) {
            edits.length = Math.min(edits.length, run.editsBefore)
            for (const child of run.children) if (!KEPT_IN_HIDDEN_RUN.has(child.name)) edit(child.start, child.end, '')
          } else if (rubies.at(-1)?.inBase) rubies.at(-1)!.text += run.text
        } else if (name === 'w:sdt') {
          if (placeholders.pop()) showingPlaceholder--
        } else if (name === 'w:rubyBase') {
          if (rubies.length > 0) rubies.at(-1)!.inBase = false
        } else if (name === 'w:ruby') {
          // Its base text alone: the annotation (w:rt, a reading) is not the text.
          const ruby = rubies.pop()!
          edits.length = Math.min(edits.length, ruby.editsBefore)
          edit(start, end, ruby.text === '' ? '' : `<w:t>${escapeText(ruby.text)}</w:t>`)
        } else if (name === 'w:ffData') {
          if (checkBox && parent === 'w:fldChar') formData = { start, depth: open.length - 1, checked: checkBox.checked ?? checkBox.byDefault ?? false }
          checkBox = undefined
        } else if (name === 'w:fldChar' && formData?.depth === open.length) {
          // The form data goes, and the box, as it shows, follows the field's start in its run.
          edit(formData.start, end, `</w:fldChar><w:t>${formData.checked ? '☒' : '☐'}</w:t>`)
          formData = undefined
        }
      },
    },
  )
  if (!wellFormed) return undefined
  const pieces: string[] = []
  let at = 0
  for (const made of edits) {
    if (made.dead) continue
    pieces.push(xml.slice(at, made.start), made.text)
    at = made.end
  }
  if (at === 0) return undefined
  pieces.push(xml.slice(at))
  return pieces.join('')
}

/**
 * The package with its document, header, footer and notes parts rewritten (rewritePart), or
 * `bytes` itself when none needs it or they hold more than `maxElements` elements. `entries` are
 * its zip entries, all inflated within the cap by the zip guard before.
 */
export function rewriteDocx(bytes: Uint8Array, entries: ZipEntry[], maxElements: number): Uint8Array {
  try {
    return rewritten(bytes, entries, { left: maxElements })
  } catch (error) {
    if (error instanceof TooManyElements) return bytes
    throw error
  }
}

function rewritten(bytes: Uint8Array, entries: ZipEntry[], budget: Budget): Uint8Array {
  const decoder = new TextDecoder('utf-8', { ignoreBOM: true })
  const read = (entry: ZipEntry) => readSmallEntry(bytes, entry, entry.uncompressedSize)
  const ordered = [...entries].sort((a, b) => a.localHeaderOffset - b.localHeaderOffset)
  // The styles part officeparser takes: the first its pattern matches.
  const stylesEntry = ordered.find(entry => STYLES_PART.test(entry.name))
  const stylesData = stylesEntry && read(stylesEntry)
  const styles = readHiddenStyles(stylesData && decoder.decode(stylesData), budget)
  const everyPart = anyHidden(styles)
  const replaced = new Map<ZipEntry, Uint8Array>()
  for (const entry of ordered) {
    if (!READ_PARTS.some(pattern => pattern.test(entry.name))) continue
    const data = read(entry)
    if (data === undefined) continue
    const buffer = Buffer.from(data.buffer, data.byteOffset, data.byteLength)
    if (!everyPart && !MARKERS.some(marker => buffer.includes(marker))) continue
    const xml = rewritePart(decoder.decode(data), styles, budget)
    const encoded = xml === undefined ? undefined : new TextEncoder().encode(xml)
    // Never larger (it cannot be, but for text the decoding itself changed, such as invalid UTF-8).
    if (encoded !== undefined && encoded.byteLength <= data.byteLength) replaced.set(entry, encoded)
  }
  return replaced.size === 0 ? bytes : replaceEntries(bytes, entries, replaced)
}
