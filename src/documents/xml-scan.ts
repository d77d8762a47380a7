import { Parser } from 'htmlparser2'

// The one XML walk the OOXML readers beside officeparser share (package relationships, Word parts
// through docx-names.ts, slides, charts, list labels).

/** What scanXml reports beside each element's start. */
export interface XmlEvents {
  /** An element's end: its start tag began at `start`, and it ends (its end tag, or its self-closing start tag) before `end`. */
  onClose?(name: string, start: number, end: number): void
  /** Text (entities decoded), in pieces: one element's text may come as several. */
  onText?(text: string): void
}

/**
 * Walks the elements of `xml` (entities decoded; comments and processing instructions are not
 * elements), each opened at `start` (the index of its start tag). False when the XML is not
 * well-formed enough for a DOM parser to read it: an element left open, or one closed while an
 * element inside it was still open. officeparser skips such a dispensable part (a presentation's
 * slide list, its relationships), so its readers here must too.
 */
export function scanXml(xml: string, onOpen: (name: string, attributes: Record<string, string>, depth: number, start: number) => void, events: XmlEvents = {}): boolean {
  // Where each open element's start tag began: htmlparser2 reports a self-closing tag's end, and
  // an element it had to close itself, both as an implied close; only the first is in that tag.
  const starts: number[] = []
  let wellFormed = true
  const parser: Parser = new Parser(
    {
      onopentag(name, attributes) {
        onOpen(name, attributes, starts.length, parser.startIndex)
        starts.push(parser.startIndex)
      },
      onclosetag(name, isImplied) {
        const start = starts.pop()!
        if (isImplied && start !== parser.startIndex) wellFormed = false
        // htmlparser2's endIndex stops short of the '>' of an end tag written "</w:p >".
        else if (events.onClose) events.onClose(name, start, xml.indexOf('>', parser.endIndex) + 1 || xml.length)
      },
      ontext(text) {
        events.onText?.(text)
      },
    },
    { xmlMode: true, decodeEntities: true },
  )
  parser.end(xml)
  return wellFormed
}
