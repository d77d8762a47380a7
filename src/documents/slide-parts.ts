import { Parser } from 'htmlparser2'
import { attribute } from './sniff'
import { readSmallEntry, type ZipEntry } from './zip-guard'

// What a presentation's slide parts say that officeparser's AST does not: whether a slide is
// hidden (`<p:sld show="0">`, skipped in a slide show), and the text of its footer, date and
// slide-number placeholders, which PowerPoint copies onto every slide ("Apply to All") and
// officeparser reads as the slide's own lines (a "7" after slide 7's text, the same footer on
// every slide).

export interface SlideFacts {
  hidden: boolean
  /** The lines of the slide-number placeholder: said by the slide's heading already. */
  numbers: string[]
  /** The lines of the footer and date placeholders, in the order the slide holds them. */
  footers: string[]
}

const SLIDE_PART = /^ppt\/slides\/slide(\d+)\.xml$/
const PLACEHOLDERS = /\stype\s*=\s*["'](?:sldNum|ftr|dt)["']/
const HIDDEN = /<(?:[\w.-]+:)?sld\s[^>]*?\sshow\s*=\s*["'](?:0|false)["']/

/**
 * Each slide's facts, by its number in the presentation: the slides its slide list names, in
 * that order, or when it names none there are, every slide part in the order of its file number
 * (the order officeparser numbers them in).
 */
export function slideFacts(bytes: Uint8Array, entries: ZipEntry[]): Map<number, SlideFacts> {
  const byName = new Map(entries.map(entry => [entry.name, entry]))
  const text = (name: string) => {
    const entry = byName.get(name)
    const data = entry && readSmallEntry(bytes, entry, entry.uncompressedSize)
    return data === undefined ? undefined : new TextDecoder().decode(data)
  }
  const parts = entries.filter(entry => SLIDE_PART.test(entry.name)).map(entry => entry.name)
  let deck = listedSlides(text, new Set(parts))
  if (deck.length === 0) deck = parts.sort((a, b) => Number(SLIDE_PART.exec(a)![1]) - Number(SLIDE_PART.exec(b)![1]))
  const facts = new Map<number, SlideFacts>()
  deck.forEach((part, index) => {
    const xml = text(part)
    if (xml !== undefined) facts.set(index + 1, readSlide(xml))
  })
  return facts
}

/** The slide parts the presentation's slide list names, in its order, each once. */
function listedSlides(text: (name: string) => string | undefined, slideParts: Set<string>): string[] {
  const targets = new Map<string, string>()
  for (const [tag] of (text('ppt/_rels/presentation.xml.rels') ?? '').matchAll(/<(?:[\w.-]+:)?Relationship\s[^>]*>/g)) {
    const id = attribute(tag, 'Id')
    const target = attribute(tag, 'Target')
    if (id !== undefined && target !== undefined) targets.set(id, new URL(target, 'http://package/ppt/presentation.xml').pathname.slice(1))
  }
  const listed = new Set<string>()
  for (const [tag] of (text('ppt/presentation.xml') ?? '').matchAll(/<(?:[\w.-]+:)?sldId\s[^>]*>/g)) {
    const part = targets.get(attribute(tag, 'r:id') ?? '')
    if (part !== undefined && slideParts.has(part)) listed.add(part)
  }
  return [...listed]
}

/** A slide part's facts; its shapes are read only when it has one of those placeholders. */
function readSlide(xml: string): SlideFacts {
  // The root's start tag comes first, after the XML declaration and perhaps a comment.
  const facts: SlideFacts = { hidden: HIDDEN.test(xml.slice(0, 4096)), numbers: [], footers: [] }
  if (!PLACEHOLDERS.test(xml)) return facts
  let kind: string | undefined // the placeholder type of the shape being read
  let lines: string[] = []
  let line = ''
  let inText = false
  const local = (name: string) => name.slice(name.indexOf(':') + 1)
  const parser = new Parser(
    {
      onopentag(raw, attributes) {
        const name = local(raw)
        if (name === 'sp') {
          kind = undefined
          lines = []
        } else if (name === 'ph') kind = attributes.type ?? 'body'
        else if (name === 't') inText = true
        else if (name === 'br') line += '\n'
      },
      ontext(data) {
        if (inText) line += data
      },
      onclosetag(raw) {
        const name = local(raw)
        if (name === 't') inText = false
        else if (name === 'p') {
          lines.push(...line.split('\n'))
          line = ''
        } else if (name === 'sp') {
          const kept = lines.map(one => one.trim()).filter(one => one !== '')
          if (kind === 'sldNum') facts.numbers.push(...kept)
          else if (kind === 'ftr' || kind === 'dt') facts.footers.push(...kept)
        }
      },
    },
    { xmlMode: true, decodeEntities: true },
  )
  parser.end(xml)
  return facts
}
