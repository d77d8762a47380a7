// The tables a Word part holds, as the DOCX rewrite (docx-rewrite.ts) reads them: each one's style,
// and its rows and cells as Word's final view shows them. A row a tracked change deleted
// (`w:trPr/w:del`) or moved away, and a cell it deleted (`w:tcPr/w:cellDel`), are not shown: the
// row's other cells move left, as Word's accepted table has them; a row left without a cell goes.
//
// A vertical merge is a column's cells from one marked `w:vMerge w:val="restart"` through the
// `w:vMerge` (continue) cells under it, shown as one cell holding the first one's text. When its
// first cell is not shown (its row or itself deleted), the first continuation still shown starts a
// merge of its own, showing its own text: it does not join a merge above the deleted row, nor is the
// deleted cell's text shown for it. Columns are the table grid's, as written (`w:gridBefore`, then
// each cell's `w:gridSpan`). The rewrite only ever turns a continuation into a start, so a
// deletion never makes cells merge that did not; and it writes the columns a row skips before its
// first cell (`w:gridBefore`) as an empty cell, for officeparser to number the cells after it.

/** What a merge in a column started from: a cell shown, or one not shown. */
type MergeStart = 'shown' | 'deleted'

interface Table {
  /** Its w:tblStyle ('' for none named). */
  style: string
  /** By grid column, the merge a continuation there would join. */
  merges: Map<number, MergeStart>
  row?: Row
}
interface Row {
  deleted: boolean
  /** The grid column the next cell starts at. */
  column: number
  cells: number
  deletedCells: number
  cell?: Cell
}
interface Cell {
  column: number
  span: number
  merge?: 'restart' | 'continue'
  deleted: boolean
}

/** Word's widest table grid. */
const MAX_COLUMNS = 63

/** A grid count as written (ST_DecimalNumber): `fallback` for a value that is not a whole number. */
function count(value: string | undefined, fallback: number): number {
  const number = Number(value)
  return Number.isSafeInteger(number) && number >= 0 ? number : fallback
}

export class OpenTables {
  private readonly open: Table[] = []

  /** The innermost table's style ('' for none named), undefined outside a table. */
  get style(): string | undefined {
    return this.open.at(-1)?.style
  }

  openTable(): void {
    this.open.push({ style: '', merges: new Map() })
  }

  setStyle(style: string | undefined): void {
    const table = this.open.at(-1)
    if (table) table.style = style ?? ''
  }

  closeTable(): void {
    this.open.pop()
  }

  openRow(): void {
    const table = this.open.at(-1)
    if (table) table.row = { deleted: false, column: 0, cells: 0, deletedCells: 0 }
  }

  deleteRow(): void {
    const row = this.open.at(-1)?.row
    if (row) row.deleted = true
  }

  gridBefore(value: string | undefined): void {
    const row = this.open.at(-1)?.row
    if (row && row.cells === 0) row.column = count(value, 0)
  }

  /**
   * The grid columns the row leaves empty before its first cell (w:gridBefore), read as its
   * properties end: officeparser numbers a row's columns from its first cell, so they are written
   * there as an empty cell spanning them. At most Word's 63 columns.
   */
  columnsBefore(): number {
    const row = this.open.at(-1)?.row
    return row && row.cells === 0 ? Math.min(row.column, MAX_COLUMNS) : 0
  }

  /** Whether the row ends not shown: deleted, or every cell of it deleted. */
  closeRow(): boolean {
    const table = this.open.at(-1)
    const row = table?.row
    if (row === undefined) return false
    table!.row = undefined
    return row.deleted || (row.cells > 0 && row.deletedCells === row.cells)
  }

  openCell(): void {
    const row = this.open.at(-1)?.row
    if (row) row.cell = { column: row.column, span: 1, deleted: false }
  }

  deleteCell(): void {
    const cell = this.open.at(-1)?.row?.cell
    if (cell) cell.deleted = true
  }

  gridSpan(value: string | undefined): void {
    const cell = this.open.at(-1)?.row?.cell
    if (cell) cell.span = Math.max(1, count(value, 1))
  }

  /** A cell's w:vMerge (`value` its w:val): true when it continues a merge whose first cell is not shown, so it must start one. */
  vMerge(value: string | undefined): boolean {
    const table = this.open.at(-1)
    const cell = table?.row?.cell
    if (cell === undefined) return false
    cell.merge = value === 'restart' ? 'restart' : 'continue'
    if (cell.merge === 'continue' && table!.merges.get(cell.column) === 'deleted') cell.merge = 'restart'
    return cell.merge === 'restart' && value !== 'restart'
  }

  /** Whether the cell ends not shown (a tracked change deleted it). */
  closeCell(): boolean {
    const table = this.open.at(-1)
    const row = table?.row
    const cell = row?.cell
    if (cell === undefined) return false
    row!.cell = undefined
    row!.cells++
    row!.column += cell.span
    const shown = !row!.deleted && !cell.deleted
    if (cell.deleted) row!.deletedCells++
    const { merges } = table!
    if (cell.merge === 'restart') merges.set(cell.column, shown ? 'shown' : 'deleted')
    // A continuation under nothing merged starts a merge (officeparser reads it so): one deleted, a deleted one.
    else if (cell.merge === 'continue' && !merges.has(cell.column)) merges.set(cell.column, shown ? 'shown' : 'deleted')
    else if (cell.merge === undefined) merges.delete(cell.column)
    return cell.deleted
  }
}
