import { Parser } from 'htmlparser2'
import type { PackageParts } from './package-parts'
import { scanXml } from './xml-scan'

// What a presentation's slide parts say that officeparser's AST does not: whether a slide is
// hidden (`<p:sld show="0">`, skipped in a slide show), and the text of its footer, date and
// slide-number placeholders, which PowerPoint copies onto every slide ("Apply to All") and
// officeparser reads as the slide's own lines (a "7" after slide 7's text, the same footer on
// every slide).

export interface SlideFacts {
  hidden: boolean
  /** The lines of the slide-number placeholder: said by the slide's heading already. */
  numbers: string[]
  /** The lines of the footer and date placeholders (and a notes page's header), in the order the slide holds them. */
  footers: string[]
  /** The same of the slide's notes page, when it has one: PowerPoint puts them on every notes page. */
  notes?: SlideFacts
}

const SLIDE_PART = /^ppt\/slides\/slide(\d+)\.xml$/
const PLACEHOLDERS = /\stype\s*=\s*["'](?:sldNum|ftr|dt|hdr)["']/
const HIDDEN = /<(?:[\w.-]+:)?sld\s[^>]*?\sshow\s*=\s*["'](?:0|false)["']/

/**
 * Each slide's facts, by its number in the presentation, numbered as officeparser numbers its
 * slides: the slide parts its slide list names, in that order, or when the list names none there
 * are (or it or the presentation's relationships cannot be read), every slide part in the order of
 * its file number.
 */
export function slideFacts(parts: PackageParts): Map<number, SlideFacts> {
  const slideParts = parts.entries.filter(entry => SLIDE_PART.test(entry.name)).map(entry => entry.name)
  let deck = listedSlides(parts, new Set(slideParts))
  if (deck.length === 0) deck = slideParts.sort((a, b) => Number(SLIDE_PART.exec(a)![1]) - Number(SLIDE_PART.exec(b)![1]))
  const facts = new Map<number, SlideFacts>()
  // Each notes page read once: a small upload could name one large page from every slide (QA).
  const notesPages = new Map<string, SlideFacts | undefined>()
  const notesOf = (path: string) => {
    if (!notesPages.has(path)) {
      const xml = parts.text(path)
      notesPages.set(path, xml === undefined ? undefined : readSlide(xml))
    }
    return notesPages.get(path)
  }
  deck.forEach((part, index) => {
    const xml = parts.text(part)
    if (xml === undefined) return
    const slide = readSlide(xml)
    const notesPart = [...(parts.relationships(part, 'officeparser')?.values() ?? [])].find(relationship => relationship.type.endsWith('/notesSlide'))?.path
    const notes = notesPart === undefined ? undefined : notesOf(notesPart)
    if (notes !== undefined) slide.notes = notes
    facts.set(index + 1, slide)
  })
  return facts
}

/** The slide parts the presentation's slide list (`p:sldIdLst`, its `p:sldId` children) names, in its order, each once. */
function listedSlides(parts: PackageParts, slideParts: Set<string>): string[] {
  const relationships = parts.relationships('ppt/presentation.xml', 'officeparser')
  const xml = parts.text('ppt/presentation.xml')
  if (relationships === undefined || xml === undefined) return []
  const listed = new Set<string>()
  let listDepth = -1 // the first slide list's depth, once met; -2 after it
  const wellFormed = scanXml(xml, (name, attributes, depth) => {
    if (listDepth === -1 && name === 'p:sldIdLst') listDepth = depth
    else if (listDepth >= 0 && depth <= listDepth) listDepth = -2
    else if (listDepth >= 0 && depth === listDepth + 1 && name === 'p:sldId') {
      const path = relationships.get(attributes['r:id'] ?? '')?.path
      if (path !== undefined && slideParts.has(path)) listed.add(path)
    }
  })
  return wellFormed ? [...listed] : []
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
          for (const each of line.split('\n')) lines.push(each)
          line = ''
        } else if (name === 'sp') {
          const kept = lines.map(one => one.trim()).filter(one => one !== '')
          if (kind === 'sldNum') facts.numbers.push(...kept)
          else if (kind === 'ftr' || kind === 'dt' || kind === 'hdr') facts.footers.push(...kept)
        }
      },
    },
    { xmlMode: true, decodeEntities: true },
  )
  parser.end(xml)
  return facts
}
