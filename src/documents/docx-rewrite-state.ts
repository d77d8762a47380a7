// What the DOCX rewrite (docx-rewrite.ts) knows of elements, and keeps of a part, as it walks it.

export const escapeText = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

/**
 * What a hidden run keeps: its properties, and what is not its text but marks where something
 * stands (fields' structure, whose begin and end must stay paired; comment references). Not a note
 * reference: officeparser attaches a note where its reference is read, and Word shows neither.
 */
export const KEPT_IN_HIDDEN_RUN = new Set(['w:rPr', 'w:fldChar', 'w:instrText', 'w:delInstrText', 'w:commentReference', 'w:lastRenderedPageBreak'])
/** The elements that put text in a paragraph (a page break between two of them separates them). */
export const TEXT = new Set(['w:t', 'w:tab', 'w:ptab', 'w:sym', 'w:noBreakHyphen', 'w:cr'])
/** What may stand between a paragraph whose mark is deleted and the next one, which it joins: range marks, at home in either. */
export const RANGE_MARKS = new Set(['w:bookmarkStart', 'w:bookmarkEnd', 'w:commentRangeStart', 'w:commentRangeEnd', 'w:moveFromRangeStart', 'w:moveFromRangeEnd', 'w:moveToRangeStart', 'w:moveToRangeEnd', 'w:permStart', 'w:permEnd', 'w:proofErr'])
/** Content a tracked change deleted or moved away (or, in properties, a paragraph mark or table row it did). */
export const REMOVED = new Set(['w:del', 'w:moveFrom'])
/** What a table's properties say of the conditional formats of its style that apply (docx-table-styles.ts). */
export const TABLE_LOOK = new Set(['w:tblLook', 'w:tblStyleRowBandSize', 'w:tblStyleColBandSize'])
/** Whether a start tag's attributes declare a namespace. */
export const declares = (attributes: Record<string, string>) => Object.keys(attributes).some(key => key === 'xmlns' || key.startsWith('xmlns:'))

/** What a ruby base's run shows of its elements other than w:t, as officeparser reads the rewritten ones. */
export const BASE_TEXT: Record<string, string> = { 'w:tab': '\t', 'w:ptab': '\t', 'w:noBreakHyphen': '-', 'w:cr': '\n', 'w:br': '\n' }

/** `name` (an element of TEXT, or a line break) shows in `paragraph`. */
export const textShown = (paragraph: Paragraph, name: string) => {
  paragraph.textSeen = true
  paragraph.breaks.length = 0
  // Text after a picture's alternative text goes on the next line; a line break already puts it there.
  if (paragraph.image && name !== 'w:br' && name !== 'w:cr') paragraph.image.edit.text += paragraph.image.br
  paragraph.image = undefined
  paragraph.freshLine = name === 'w:br' || name === 'w:cr'
}
/** Whether what `paragraph` shows next goes on the line its text is on (a picture's alternative text starts a line of its own). */
export const lineGoesOn = (paragraph: Paragraph) => paragraph.textSeen && paragraph.breaks.length === 0 && !paragraph.freshLine
/** A picture's alternative text, written by `made`, is what `paragraph` shows last: `br` goes after it if text follows. */
export const imageShown = (paragraph: Paragraph, made: Edit, br: string) => {
  paragraph.image = { edit: made, br }
  paragraph.textSeen = true
  paragraph.breaks.length = 0
  paragraph.freshLine = false
}

/** `xml` with `edits` (in order, none overlapping) made, as the pieces of its text; undefined when none is. */
export function applyEdits(xml: string, edits: Edit[]): { pieces: string[] } | undefined {
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

export interface Edit {
  start: number
  end: number
  text: string
  dead?: boolean
}
export interface Paragraph {
  style?: string
  /** Its table style's setting for its cell (docx-table-styles.ts), when it is in a table. */
  table?: boolean
  textSeen: boolean
  /** Page and column breaks after the paragraph's text, not yet followed by more of it. */
  breaks: Edit[]
  /** A picture's alternative text written last, not yet followed by more text (ImageLine). */
  image?: ImageLine
  /** What it shows last is a line break (w:br, w:cr): what follows starts a line. */
  freshLine?: boolean
  /** Its start tag declares no namespace: what follows it may join it. */
  plain: boolean
  /** Its mark is deleted (a tracked change): it joins the next paragraph. */
  markDeleted?: boolean
  /** It holds what Word shows: a run's content, an equation. */
  shows?: boolean
  /** What its own w:numPr sets: a level without an instance (w:numId) is a level of its style's list. */
  numbering?: { numId: boolean; level: boolean }
  /** Its mark's own w:vanish and character style (`w:pPr/w:rPr`): whether Word shows the mark, and the list label it carries. */
  markVanish?: boolean
  markStyle?: string
  /** Its properties' removal (the paragraph it joins keeps its own), undone if it joins none; unset if not undoable. */
  properties?: Edit
  /** The paragraph it was joined to, its start tag removed. */
  joined?: Joining
}
/** A paragraph whose mark is deleted, its end tag removed, waiting for its next sibling to be the paragraph it joins. */
export interface Joining {
  depth: number
  qname: string
  plain: boolean
  end: Edit
  properties?: Edit
  /** Its text seen and its breaks after it: the paragraph it joins goes on from them, as one paragraph would. */
  textSeen: boolean
  breaks: Edit[]
  image?: ImageLine
}
/** A picture's alternative text as written (docx-drawings.ts), and the line break it takes when more text follows it in its paragraph. */
export interface ImageLine {
  edit: Edit
  br: string
}
export interface Run {
  /** The edits made before the run: those after are inside it. */
  editsBefore: number
  paragraph?: Paragraph
  style?: string
  vanish?: boolean
  children: Array<{ name: string; start: number; end: number }>
  /** What it shows, for a run in a ruby's base. */
  text?: string
}
export interface Open {
  name: string
  qname: string
  attributes: Record<string, string>
  /** An alternate-content branch Word does not show, or what a tracked change deleted or moved away. */
  dropped?: boolean
  /** The name its tags are written with instead, for officeparser to read it as Word does. */
  renamed?: string
}
