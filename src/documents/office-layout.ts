// The text layout of a DOCX or PPTX, rendered from officeparser's AST so that the layout is ours:
// paragraphs one per line; table rows one per line, cells tab-separated, each cell on one line
// (its paragraphs and any table nested in it joined by spaces); a DOCX's headers before its body
// under "[Header]" and its footers after it under "[Footer]", each distinct line once; slides under
// "[Slide N]" (N the slide's own number), each followed by its speaker notes under "[Notes]".
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
function walk(nodes: Node[], visit: (node: Node) => boolean): void {
  const stack = nodes.slice().reverse()
  while (stack.length > 0) {
    const node = stack.pop()!
    const children = node.children
    if (visit(node) && children) for (let index = children.length - 1; index >= 0; index--) stack.push(children[index]!)
  }
}

const BLOCKS = new Set(['paragraph', 'heading', 'list'])

/**
 * A block's own text (its runs joined, which officeparser gives as `text`), or undefined when the
 * node is to be read through its children: a container, or a paragraph holding a table (rare).
 */
function blockText(node: Node): string | undefined {
  if (!BLOCKS.has(node.type) || node.children?.some(child => child.type === 'table')) return undefined
  if (node.text !== undefined) return node.text
  const runs: string[] = []
  walk(node.children ?? [], run => {
    if (run.children?.length) return true
    runs.push(run.text ?? '')
    return false
  })
  return runs.join('')
}

/**
 * A cell's text: every paragraph in it, nested tables' cells included, joined by spaces, on one
 * line. officeparser's own `cell.text` joins a cell's paragraphs with nothing ("multi" and "para
 * cell" gave "multipara cell") and leaves out nested tables (a cell holding one was empty).
 */
function cellText(cell: Node): string {
  if (!cell.children?.length) return oneLine(cell.text ?? '')
  const parts: string[] = []
  walk(cell.children, node => {
    const own = blockText(node)
    if (own === undefined) {
      if (node.children?.length) return true
      if (node.text) parts.push(oneLine(node.text))
      return false
    }
    const line = oneLine(own)
    if (line !== '') parts.push(line)
    return false
  })
  return parts.join(' ')
}

function rows(table: Node, out: string[]): void {
  for (const row of table.children ?? []) {
    if (row.type !== 'row') continue
    out.push((row.children ?? []).filter(cell => cell.type === 'cell').map(cellText).join('\t').replace(/\t+$/, ''))
  }
}

/** Appends the lines of `nodes`: a block's text as one line (empty ones too), a table's rows. */
function render(nodes: Node[], out: string[]): void {
  walk(nodes, node => {
    if (node.type === 'table') {
      rows(node, out)
      return false
    }
    const own = blockText(node)
    if (own !== undefined) {
      out.push(own)
      return false
    }
    if (node.children?.length) return true
    if (node.text) out.push(node.text)
    return false
  })
}

const hasText = (lines: string[]) => lines.some(line => line.trim() !== '')

/**
 * The lines of headers or footers, each distinct one once: Word keeps one part per kind of page
 * (first, odd, even) per section, which mostly repeat one another, and empty ones are common.
 */
function distinctLines(nodes: Node[] | undefined): string[] {
  const lines: string[] = []
  render(nodes ?? [], lines)
  const seen = new Set<string>()
  for (const line of lines.flatMap(line => line.split('\n'))) if (line.trim() !== '') seen.add(line)
  return [...seen]
}

export function docxLines(ast: OfficeAst): string[] {
  const out: string[] = []
  const headers = distinctLines(ast.auxiliary?.headers)
  if (headers.length > 0) out.push('[Header]', ...headers, '')
  render(ast.content, out)
  const footers = distinctLines(ast.auxiliary?.footers)
  if (footers.length > 0) out.push('', '[Footer]', ...footers)
  return out
}

/**
 * Slides in order, each under its own number (officeparser's `slideNumber`, its place in the
 * presentation), then its notes under "[Notes]". A slide with no text, in it or in its notes (a
 * picture alone), is left out, its number with it: officeparser gives no node at all for some such
 * slides (one holding only a picture), so leaving them all out is what keeps the layout predictable.
 */
export function pptxLines(ast: OfficeAst): string[] {
  const slides = ast.content.filter(node => node.type === 'slide')
  const number = (slide: Node) => Number(slide.metadata?.slideNumber ?? 0)
  slides.sort((a, b) => number(a) - number(b))
  const out: string[] = []
  for (const slide of slides) {
    const body: string[] = []
    render(slide.children ?? [], body)
    const notes: string[] = []
    render(slide.notes ?? [], notes)
    while (notes.length > 0 && notes.at(-1)!.trim() === '') notes.pop()
    // PowerPoint puts a slide-number placeholder on every notes page, after the notes themselves:
    // read as text it is the slide's number on a line of its own, which says nothing.
    if (notes.at(-1)?.trim() === String(number(slide))) notes.pop()
    if (!hasText(body) && !hasText(notes)) continue
    if (out.length > 0) out.push('')
    out.push(`[Slide ${number(slide)}]`, ...body)
    if (hasText(notes)) out.push('[Notes]', ...notes)
  }
  return out
}
