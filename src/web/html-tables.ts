/**
 * How ./html-to-text.ts lays out HTML tables. The walk writes a page's text as a stream of tokens;
 * a row's layout is only known when it ends, so what stands between its cells (and the line
 * breaks inside them) is written as placeholder tokens that the row's end sets:
 * - a data row (every cell one line of text) is one line, its cells separated by tabs, an empty
 *   cell keeping its tab so that each value stays under its column (as src/documents lays out a
 *   DOCX table); a cell spanning columns (colspan) is followed by a tab per column it covers, and
 *   a column a cell above still covers (rowspan) keeps its tab, as a browser lines them up (a
 *   DOCX table's merged cells are not expanded); tabs after the row's last value are not written,
 *   and a row of empty cells is no line at all;
 * - a row any of whose cells runs over several lines (paragraphs, a list, a <pre>, a nested
 *   table of several rows: a layout table's, a forum's comments) is read as blocks: each non-empty
 *   cell on its own line(s), its inside laid out as outside tables.
 * Each <table> is a frame of its own (the innermost owns the cells being written), so a data table
 * in a layout cell keeps its columns. Cells and rows are ended by the tags that start the next
 * (tr, td, th, thead, tbody, tfoot), whatever htmlparser2 nested them in: it closes an element
 * implicitly only when it is the innermost open one, so a <td> after an unclosed <p> or <font>
 * would open inside the previous cell. Cell tags outside any table are ignored, as browsers do.
 */

// Spans are followed within the first columns of a table only (HTML caps a colspan at 1000), and
// the tabs they add are bounded per page (see TableLayout's padding budget): a page of many wide
// spans must not grow its text without bound.
const MAX_COLUMNS = 1000
const MAX_COLSPAN = 1000
const MAX_ROWSPAN = 65_534
// rowspan="0": to the end of the row group (where every row span ends).
const TO_GROUP_END = MAX_ROWSPAN + 1

/** HTML's rules for parsing non-negative integers: leading digits after optional whitespace and "+", else null. */
function spanValue(value: string | undefined): number | null {
  const digits = /^[\t\n\f\r ]*\+?(\d+)/.exec(value ?? '')?.[1]
  return digits === undefined ? null : Number(digits.slice(0, 9))
}

/** A cell's colspan and rowspan as browsers read them. */
export function cellSpans(attributes: Record<string, string>): { colspan: number; rowspan: number } {
  const colspan = spanValue(attributes.colspan)
  const rowspan = spanValue(attributes.rowspan)
  return {
    colspan: colspan === null || colspan === 0 ? 1 : Math.min(colspan, MAX_COLSPAN),
    rowspan: rowspan === null ? 1 : rowspan === 0 ? TO_GROUP_END : Math.min(rowspan, MAX_ROWSPAN),
  }
}

// Stands for the tab between two cells while the text is cleaned (which makes tabs spaces): a
// control character, never page text (the walk drops those).
export const CELL_GAP = '\u0001'

interface Cell {
  /** The token before the cell's text: the gap from the previous cell, or a line break. */
  start: number
  /** The line breaks written inside the cell (a space in a data row). */
  breaks: number[]
  /** Whether the cell has text (nested tables' included). */
  text: boolean
  /** A line break follows its text: more text makes the cell several lines. */
  broken: boolean
  /** The cell runs over several lines (or holds a <pre>): its row is read as blocks. */
  lines: boolean
  colspan: number
  rowspan: number
}

interface Row {
  /** The line break that starts the row (nothing when it has no text). */
  start: number
  cells: Cell[]
  /** Line breaks written in the row but outside its cells (what an unclosed element closes late). */
  loose: number[]
}

interface Frame {
  row: Row | null
  cell: Cell | null
  captions: number
  /** Per column (the first MAX_COLUMNS), how many more rows a cell above still covers. */
  below: number[]
  /** How many entries of `below` are not 0. */
  covered: number
  /** A row group ended: a row after it is in a new (implied) group, where no row span reaches. */
  groupEnded: boolean
}

/** The row spans of a table end with their row group; so does the wait for a row after one. */
function endSpans(frame: Frame): void {
  frame.below = []
  frame.covered = 0
  frame.groupEnded = false
}

export class TableLayout {
  private readonly frames: Frame[] = []

  /**
   * `write` appends a token to `tokens` and returns its index; `padding` is how many tabs spans
   * may add to the page in all (past it, a spanning cell is followed by one tab, as any other).
   */
  constructor(private readonly tokens: string[], private readonly write: (text: string) => number, private padding: number) {}

  startTable(): void {
    this.frames.push({ row: null, cell: null, captions: 0, below: [], covered: 0, groupEnded: false })
  }

  /** A thead, tbody or tfoot starts: the open row ends, and so do the row spans (HTML ends them with their group). */
  startRowGroup(): void {
    this.endRow()
    const frame = this.frames.at(-1)
    if (frame) endSpans(frame)
  }

  /** A thead, tbody or tfoot ends: a row after it starts an implied tbody (endSpans then). */
  endRowGroup(): void {
    this.endRow()
    const frame = this.frames.at(-1)
    if (frame) frame.groupEnded = true
  }

  endTable(): void {
    if (this.frames.length === 0) return
    this.endRow()
    this.frames.pop()
  }

  /** Every table still open (the walk was cut off), innermost first. */
  endAll(): void {
    while (this.frames.length > 0) this.endTable()
  }

  startCaption(): void {
    const frame = this.frames.at(-1)
    if (frame) frame.captions += 1
  }

  endCaption(): void {
    const frame = this.frames.at(-1)
    if (frame) frame.captions = Math.max(0, frame.captions - 1)
  }

  startRow(): void {
    const frame = this.frames.at(-1)
    if (!frame) return
    this.endRow()
    if (frame.groupEnded) endSpans(frame)
    frame.row = { start: this.write('\n'), cells: [], loose: [] }
  }

  startCell(spans: { colspan: number; rowspan: number }): void {
    const frame = this.frames.at(-1)
    if (!frame) return
    // A cell directly in a table or row group is in a row of its own, as browsers make it.
    if (frame.row === null) this.startRow()
    frame.cell = { start: this.write(''), breaks: [], text: false, broken: false, lines: false, ...spans }
    frame.row!.cells.push(frame.cell)
  }

  endCell(): void {
    const frame = this.frames.at(-1)
    if (frame) frame.cell = null
  }

  /** Text was written: the open cell has content. */
  text(): void {
    const cell = this.openCell()
    if (cell === null) return
    if (cell.broken) cell.lines = true
    cell.text = true
  }

  /** A line break (a block's start or end, a <br>) was written as the token `token`. */
  lineBreak(token: number): void {
    const frame = this.frames.at(-1)
    if (frame !== undefined && frame.cell === null && frame.row !== null) {
      frame.row.loose.push(token)
      return
    }
    const cell = this.openCell()
    if (cell === null) return
    cell.breaks.push(token)
    if (cell.text) cell.broken = true
  }

  /** A <pre> starts: kept verbatim, so its cell's row is read as blocks. */
  pre(): void {
    const cell = this.openCell()
    if (cell !== null) cell.lines = true
  }

  /** Whether blank text here is dropped: in a table but outside its cells and caption, where it is not rendered. */
  dropsBlank(): boolean {
    const frame = this.frames.at(-1)
    return frame !== undefined && frame.cell === null && frame.captions === 0
  }

  /** Ends the innermost table's open row (and cell), setting its placeholders. */
  endRow(): void {
    const frame = this.frames.at(-1)
    const row = frame?.row
    if (!frame || !row) return
    frame.row = null
    frame.cell = null
    const { tokens } = this
    let last = -1
    let blocks = false
    let lines = 0 // the lines of text a row read as blocks gives (counting 2 for "several")
    for (const [index, cell] of row.cells.entries()) {
      if (cell.text) {
        last = index
        lines += cell.lines ? 2 : 1
      }
      blocks ||= cell.lines
    }
    tokens[row.start] = last < 0 ? '' : '\n'
    const columns = this.columns(frame, row.cells)
    let first = true
    for (const [index, cell] of row.cells.entries()) {
      if (blocks) {
        tokens[cell.start] = cell.text && !first ? '\n' : ''
        if (!cell.text) for (const token of cell.breaks) tokens[token] = ''
      } else {
        tokens[cell.start] = index > last ? '' : this.gap(index === 0 ? columns[0]! : columns[index]! - columns[index - 1]!, index === 0 ? 0 : 1)
        for (const token of cell.breaks) tokens[token] = ' '
      }
      if (cell.text) first = false
    }
    if (!blocks) for (const token of row.loose) tokens[token] = ' '
    // The row is a line (or lines) of the cell that holds its table.
    const outer = this.openCell()
    if (last < 0 || outer === null) return
    outer.breaks.push(row.start)
    if (outer.text || (blocks && lines > 1)) outer.lines = true
    outer.text = true
  }

  /**
   * The column each of a row's cells starts at, past the columns cells above still cover, and
   * the row's own rowspans recorded for the rows below.
   */
  private columns(frame: Frame, cells: Cell[]): number[] {
    const { below } = frame
    const starts: number[] = []
    let column = 0
    for (const cell of cells) {
      while (frame.covered > 0 && column < below.length && below[column]! > 0) column += 1
      starts.push(column)
      column += cell.colspan
    }
    if (frame.covered > 0) {
      for (let index = 0; index < below.length; index += 1) if (below[index]! > 0 && --below[index]! === 0) frame.covered -= 1
    }
    for (const [index, cell] of cells.entries()) {
      if (cell.rowspan === 1) continue
      for (let column = starts[index]!; column < Math.min(starts[index]! + cell.colspan, MAX_COLUMNS); column += 1) {
        while (below.length <= column) below.push(0)
        if (below[column] === 0) frame.covered += 1
        below[column] = Math.max(below[column]!, cell.rowspan - 1)
      }
    }
    return starts
  }

  /** The tabs before a cell `width` columns past the previous one (`least` when the padding is spent). */
  private gap(width: number, least: number): string {
    if (width <= least) return CELL_GAP.repeat(Math.max(width, 0))
    if (width - least > this.padding) return CELL_GAP.repeat(least)
    this.padding -= width - least
    return CELL_GAP.repeat(width)
  }

  /** The cell being written: the innermost open one (text outside a nested table's cells is its outer cell's). */
  private openCell(): Cell | null {
    for (let index = this.frames.length - 1; index >= 0; index -= 1) {
      const cell = this.frames[index]!.cell
      if (cell !== null) return cell
    }
    return null
  }
}
