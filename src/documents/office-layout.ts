// The text layout of a DOCX or PPTX, rendered from officeparser's AST so that the layout is ours:
// paragraphs one per line; table rows one per line, cells tab-separated, each cell on one line
// (its paragraphs and any table nested in it joined by spaces); slides in order, each under "[Slide N]" (N the slide's own number).
//
// Every walk here is a loop over an explicit stack, never a recursion: officeparser reads tables
// nested thousands deep (5,000 in a worker; deeper it refuses the document), and rendering such a
// tree recursively could overflow the stack where the parser did not.

export type Node = { type: string; text?: string; metadata?: Record<string, unknown>; children?: Node[] }

/** What of officeparser's AST the layout reads. */
export interface OfficeAst {
  content: Node[]
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

export function docxLines(ast: OfficeAst): string[] {
  const out: string[] = []
  render(ast.content, out)
  return out
}

const hasText = (lines: string[]) => lines.some(line => line.trim() !== '')

/**
 * Slides in order, each under its own number (officeparser's `slideNumber`, its place in the
 * presentation). A slide with no text (a picture alone) is left out, its number with it:
 * officeparser gives no node at all for some such slides, so leaving them all out is what keeps
 * the layout predictable.
 */
export function pptxLines(ast: OfficeAst): string[] {
  const slides = ast.content.filter(node => node.type === 'slide')
  const number = (slide: Node) => Number(slide.metadata?.slideNumber ?? 0)
  slides.sort((a, b) => number(a) - number(b))
  const out: string[] = []
  for (const slide of slides) {
    const body: string[] = []
    render(slide.children ?? [], body)
    if (!hasText(body)) continue
    if (out.length > 0) out.push('')
    out.push(`[Slide ${number(slide)}]`, ...body)
  }
  return out
}
