import { ListLabels } from './list-labels'
import type { SlideFacts } from './slide-parts'

// The text layout of a DOCX or PPTX, rendered from officeparser's AST so that the layout is ours:
// paragraphs one per line; table rows one per line, cells tab-separated, each cell on one line
// (its paragraphs and any table nested in it joined by spaces); a DOCX's headers before its body
// under "[Header]" and its footers after it under "[Footer]", each distinct line once; slides under
// "[Slide N]" (N the slide's own number), each followed by its speaker notes under "[Notes]", a
// presentation's footers once at its end.
// A DOCX's footnotes and endnotes are marked where they are referenced, "[^1]", "[^2]" (one series
// in the order met), and listed after the body under "[Footnotes]" and "[Endnotes]", as Word's
// own plain-text save keeps them; reviewers' comments are left out, as it leaves them out.
//
// Every walk here is a loop over an explicit stack, never a recursion: officeparser reads tables
// nested thousands deep (5,000 in a worker; deeper it refuses the document), and rendering such a
// tree recursively could overflow the stack where the parser did not.

export type Node = { type: string; text?: string; metadata?: Record<string, unknown>; children?: Node[]; notes?: Node[] }

/** What of officeparser's AST the layout reads. */
export interface OfficeAst {
  content: Node[]
  /** A DOCX's headers and footers: the blocks of every header (footer) part, one list, parts in turn. */
  auxiliary?: { headers?: Node[]; footers?: Node[] }
}

/** A cell's text on one line: tabs and newlines inside it would break the row layout. */
export function oneLine(text: string): string {
  return text.replace(/[\t\r\n]+/g, ' ').trim()
}

/** Visits `nodes` and their descendants in document order; a node's children are visited when `visit` returns true. */
export function walk(nodes: Node[], visit: (node: Node) => boolean): void {
  const stack = nodes.slice().reverse()
  while (stack.length > 0) {
    const node = stack.pop()!
    const children = node.children
    if (visit(node) && children) for (let index = children.length - 1; index >= 0; index--) stack.push(children[index]!)
  }
}

const BLOCKS = new Set(['paragraph', 'heading', 'list'])

/** Whether Word shows nothing of a block, not even a line (ListLabels.hidden: a DOCX's paragraphs the rewrite marked). */
type Hidden = (block: Node) => boolean
const NONE_HIDDEN: Hidden = () => false

export type NoteKind = 'footnote' | 'endnote'

/** A DOCX's charts, each part's read as the layout reaches the part showing it (chart-parts.ts WordCharts): their lines. */
export interface DocxCharts {
  pages(kind: 'header' | 'footer'): string[]
  body(): string[]
  note(kind: NoteKind, id: string): string[]
}
const NO_CHARTS: DocxCharts = { pages: () => [], body: () => [], note: () => [] }

/**
 * The footnotes and endnotes met while rendering, in order. officeparser hangs a note on the run
 * before its reference mark (`run.notes`), its text without the mark; each note met gets the next
 * label, so the labels follow the reading order whatever ids the document gave them.
 */
class NoteList {
  readonly met: Array<{ label: string; kind: NoteKind; note: Node }> = []

  /** The labels of a run's notes, registering each: "" for a run without any. */
  markers(run: Node): string {
    let out = ''
    for (const note of run.notes ?? []) {
      if (note.type !== 'note') continue
      const label = `[^${this.met.length + 1}]`
      this.met.push({ label, kind: note.metadata?.noteType === 'endnote' ? 'endnote' : 'footnote', note })
      out += label
    }
    return out
  }
}

const hasNotes = (nodes: Node[]) => {
  let found = false
  walk(nodes, node => {
    if (node.notes?.length) found = true
    return !found && !!node.children?.length
  })
  return found
}

/** A leaf's text followed by the labels of its notes. */
const leafText = (node: Node, notes: NoteList | undefined) => (node.text ?? '') + (notes?.markers(node) ?? '')

/**
 * A block's own text (its runs joined, which officeparser gives as `text`, with the labels of any
 * notes), or undefined when the node is to be read through its children: a container, or a
 * paragraph holding a table (rare).
 */
function blockText(node: Node, notes: NoteList | undefined): string | undefined {
  if (!BLOCKS.has(node.type) || node.children?.some(child => child.type === 'table')) return undefined
  if (node.text !== undefined && (notes === undefined || (!node.notes?.length && !hasNotes(node.children ?? [])))) return node.text
  // A note referenced before any run (the paragraph's or cell's first thing) hangs on the block
  // itself: its label opens the line (QA: such notes were lost, label and text).
  const runs: string[] = [notes?.markers(node) ?? '']
  walk(node.children ?? [], run => {
    if (run.children?.length) {
      runs.push(notes?.markers(run) ?? '')
      return true
    }
    runs.push(leafText(run, notes))
    return false
  })
  return runs.join('')
}

/**
 * A cell's text: every paragraph in it, nested tables' cells included, joined by spaces, on one
 * line, a list item with its label. officeparser's own `cell.text` joins a cell's paragraphs with
 * nothing ("multi" and "para cell" gave "multipara cell") and leaves out nested tables (a cell
 * holding one was empty).
 */
function cellText(cell: Node, notes: NoteList | undefined, lists: ListLabels | undefined, hidden: Hidden): string {
  if (!cell.children?.length) return oneLine(leafText(cell, notes))
  const parts: string[] = []
  walk(cell.children, node => {
    const own = blockText(node, notes)
    if (own === undefined) {
      if (node.children?.length) return true
      const text = leafText(node, notes)
      if (text) parts.push(oneLine(text))
      return false
    }
    const line = oneLine((lists?.label(node) ?? '') + own)
    if (line !== '' && !hidden(node)) parts.push(line)
    return false
  })
  return parts.join(' ')
}

/**
 * A table's rows, one per line, each cell under its own column: officeparser leaves out the cells a
 * vertical merge continues and gives a horizontal merge one cell, but names each cell's column
 * (`metadata.col`), so the row is laid out by it (a merged cell's columns after its first stay
 * empty, as an empty cell's do). Without column numbers the cells are taken in turn.
 */
function rows(table: Node, out: string[], notes: NoteList | undefined, lists: ListLabels | undefined, hidden: Hidden): void {
  for (const row of table.children ?? []) {
    if (row.type !== 'row') continue
    const cells = (row.children ?? []).filter(cell => cell.type === 'cell')
    const line: string[] = []
    for (const cell of cells) {
      const column = cell.metadata?.col
      // Each column once, in order: a number that would move a cell back or far ahead is not trusted.
      const at = Number.isInteger(column) && (column as number) >= line.length && (column as number) < line.length + MAX_COLUMN_GAP ? (column as number) : line.length
      while (line.length < at) line.push('')
      line.push(cellText(cell, notes, lists, hidden))
    }
    out.push(line.join('\t').replace(/\t+$/, ''))
  }
}

/** The most empty columns a cell's column number may skip (Word's tables have at most 63 columns). */
const MAX_COLUMN_GAP = 64

/**
 * Appends the lines of `nodes`: a block's text as one line (empty ones too), a table's rows. With
 * `notes`, the notes met are labelled and registered there; without, they are not read. A block
 * `hidden` says Word shows nothing of is no line, not even an empty one.
 */
function render(nodes: Node[], out: string[], notes?: NoteList, lists?: ListLabels, hidden: Hidden = NONE_HIDDEN): void {
  walk(nodes, node => {
    if (node.type === 'table') {
      rows(node, out, notes, lists, hidden)
      return false
    }
    const own = blockText(node, notes)
    if (own !== undefined) {
      // A paragraph Word shows nothing of is no line, not even an empty one; its list counts it still.
      const label = lists?.label(node) ?? ''
      if (!hidden(node)) out.push(label + own)
      return false
    }
    if (node.children?.length) return true
    const text = leafText(node, notes)
    if (text) out.push(text)
    return false
  })
}

/**
 * The notes' sections: "[Footnotes]" then "[Endnotes]", each note its label and its text (the
 * space Word leaves after the removed reference mark trimmed), then its charts. A note's own text
 * may reference further notes (rare, but the format allows it): they are met, and listed, in turn.
 */
function noteSections(notes: NoteList, charts: DocxCharts, hidden: Hidden): string[] {
  const sections: Record<NoteKind, string[]> = { footnote: [], endnote: [] }
  for (let index = 0; index < notes.met.length; index++) {
    const { label, kind, note } = notes.met[index]!
    const lines: string[] = []
    if (note.children?.length) render(note.children, lines, notes, undefined, hidden)
    else lines.push(note.text ?? '')
    const first = lines.findIndex(line => line.trim() !== '')
    const last = lines.findLastIndex(line => line.trim() !== '')
    const text = first < 0 ? [] : lines.slice(first, last + 1)
    sections[kind].push(`${label} ${(text[0] ?? '').trimStart()}`.trimEnd(), ...text.slice(1))
    const id = note.metadata?.noteId
    if (typeof id === 'string') sections[kind].push(...charts.note(kind, id))
  }
  const out: string[] = []
  if (sections.footnote.length > 0) out.push('[Footnotes]', ...sections.footnote)
  if (sections.endnote.length > 0) out.push('[Endnotes]', ...sections.endnote)
  return out
}

const hasText = (lines: string[]) => lines.some(line => line.trim() !== '')

/**
 * The lines of headers or footers, each distinct one once: Word keeps one part per kind of page
 * (first, odd, even) per section, which mostly repeat one another, and empty ones are common.
 */
function distinctLines(nodes: Node[] | undefined, hidden: Hidden): string[] {
  const lines: string[] = []
  render(nodes ?? [], lines, undefined, undefined, hidden)
  const seen = new Set<string>()
  for (const line of lines.flatMap(line => line.split('\n'))) if (line.trim() !== '') seen.add(line)
  return [...seen]
}

/**
 * A DOCX's lines; its list items labelled by `lists` (list-labels.ts); its charts (charts.ts) after
 * the lines of the part showing them: the headers', the body, a note's, the footers'.
 */
export function docxLines(ast: OfficeAst, charts: DocxCharts = NO_CHARTS, lists: ListLabels = new ListLabels(new Map())): string[] {
  const out: string[] = []
  // The rewrite marks a paragraph Word shows nothing of in every part: its headers' and notes' too.
  const hidden: Hidden = block => lists.hidden(block)
  const headers = [...distinctLines(ast.auxiliary?.headers, hidden), ...charts.pages('header')]
  if (headers.length > 0) out.push('[Header]', ...headers, '')
  const notes = new NoteList()
  render(ast.content, out, notes, lists, hidden)
  const bodyCharts = charts.body()
  if (bodyCharts.length > 0) out.push('', ...bodyCharts)
  const sections = noteSections(notes, charts, hidden)
  if (sections.length > 0) out.push('', ...sections)
  const footers = [...distinctLines(ast.auxiliary?.footers, hidden), ...charts.pages('footer')]
  if (footers.length > 0) out.push('', '[Footer]', ...footers)
  return out
}

/**
 * Slides in order, each under its own number (officeparser's `slideNumber`, its place in the
 * presentation), "(hidden)" after it for a slide the show skips, then its notes under "[Notes]". A
 * slide with no text, in it or in its notes (a picture alone), is left out, its number with it:
 * officeparser gives no node at all for some such slides (one holding only a picture), so leaving
 * them all out is what keeps the layout predictable. A slide's number, footer and date placeholders
 * (`facts`, slide-parts.ts) are not its text: the number is left out, and each distinct footer or
 * date line is listed once, after the last slide, under "[Footer]".
 */
export function pptxLines(ast: OfficeAst, facts: Map<number, SlideFacts> = new Map()): string[] {
  const slides = ast.content.filter(node => node.type === 'slide')
  const number = (slide: Node) => Number(slide.metadata?.slideNumber ?? 0)
  slides.sort((a, b) => number(a) - number(b))
  const out: string[] = []
  const footers = new Set<string>()
  for (const slide of slides) {
    const fact = facts.get(number(slide))
    let body: string[] = []
    render(slide.children ?? [], body)
    if (fact) {
      body = body.flatMap(line => line.split('\n'))
      removeLast(body, fact.numbers)
      for (const footer of removeLast(body, fact.footers)) footers.add(footer)
    }
    let notes: string[] = []
    render(slide.notes ?? [], notes)
    if (fact?.notes) {
      notes = notes.flatMap(line => line.split('\n'))
      removeLast(notes, fact.notes.numbers)
      for (const footer of removeLast(notes, fact.notes.footers)) footers.add(footer)
    }
    while (notes.length > 0 && notes.at(-1)!.trim() === '') notes.pop()
    // PowerPoint puts a slide-number placeholder on every notes page, after the notes themselves:
    // read as text it is the slide's number on a line of its own, which says nothing.
    if (notes.at(-1)?.trim() === String(number(slide))) notes.pop()
    if (!hasText(body) && !hasText(notes)) continue
    if (out.length > 0) out.push('')
    out.push(`[Slide ${number(slide)}${fact?.hidden ? ' (hidden)' : ''}]`, ...body)
    if (hasText(notes)) out.push('[Notes]', ...notes)
  }
  if (footers.size > 0) out.push(...(out.length > 0 ? [''] : []), '[Footer]', ...footers)
  return out
}

/** Removes from `lines` the last line equal to each of `wanted` (trimmed); returns those found. */
function removeLast(lines: string[], wanted: string[]): string[] {
  const found: string[] = []
  for (const line of wanted) {
    const at = lines.findLastIndex(candidate => candidate.trim() === line)
    if (at < 0) continue
    lines.splice(at, 1)
    found.push(line)
  }
  return found
}
