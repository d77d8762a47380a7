import { DEFAULT_LOOK, readLook, withBand, type CellPlace, type TableLook } from './docx-table-styles'

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
//
// Where a cell stands among the rows and cells shown (its table style's conditional formats apply
// by it: docx-table-styles.ts) needs the table's last row and a row's last cell, known only at
// their ends: each table's shape (per row, the cells shown, or -1 for a row not shown) is recorded
// as it ends, by order of the tables' starts, for a second reading of the part to know them.

/** What a merge in a column started from: a cell shown, or one not shown. */
type MergeStart = 'shown' | 'deleted'

interface Table {
  /** Its w:tblStyle ('' for none named). */
  style: string
  look: TableLook
  /** By grid column, the merge a continuation there would join. */
  merges: Map<number, MergeStart>
  row?: Row
  /** Its place among the part's tables, by their starts. */
  ordinal: number
  /** Its shape as recorded, and as known from a first reading. */
  recorded: number[]
  known?: { shape: number[]; rows: number }
  rowsSeen: number
  rowsShown: number
  /** Rows from the first on that take its first-row format (w:tblHeader: Word repeats them as the table's header). */
  headerRows: number
}
interface Row {
  deleted: boolean
  header: boolean
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
  private opened = 0
  /** Each table's shape, by its place among the part's tables. */
  readonly shapes: number[][] = []

  /** `known`: the part's table shapes, from a first reading of it. */
  constructor(private readonly known?: number[][]) {}

  /** The innermost table's style ('' for none named), undefined outside a table. */
  get style(): string | undefined {
    return this.open.at(-1)?.style
  }

  get look(): TableLook {
    return this.open.at(-1)?.look ?? DEFAULT_LOOK
  }

  openTable(): void {
    const ordinal = this.opened++
    const shape = this.known?.[ordinal]
    const known = shape && { shape, rows: shape.filter(cells => cells >= 0).length }
    this.open.push({ style: '', look: DEFAULT_LOOK, merges: new Map(), ordinal, recorded: [], known, rowsSeen: 0, rowsShown: 0, headerRows: 0 })
  }

  /** The table's w:tblLook, or its own band size. */
  setLook(name: string, attributes: Record<string, string>): void {
    const table = this.open.at(-1)
    if (table) table.look = name === 'w:tblLook' ? readLook(attributes, table.look) : withBand(table.look, name, attributes['w:val'])
  }

  /** Where the open cell stands among those shown, when the table's shape is known. */
  place(): CellPlace | undefined {
    const table = this.open.at(-1)
    const row = table?.row
    const columns = row && table.known?.shape[table.rowsSeen - 1]
    if (row?.cell === undefined || columns === undefined || columns < 0) return undefined
    const headerRows = row.header && table!.headerRows === table!.rowsShown ? table!.headerRows + 1 : Math.max(table!.headerRows, 1)
    return { row: table!.rowsShown, rows: table!.known!.rows, headerRows, column: row.cells - row.deletedCells, columns }
  }

  setStyle(style: string | undefined): void {
    const table = this.open.at(-1)
    if (table) table.style = style ?? ''
  }

  closeTable(): void {
    const table = this.open.pop()
    if (table) this.shapes[table.ordinal] = table.recorded
  }

  openRow(): void {
    const table = this.open.at(-1)
    if (table === undefined) return
    table.row = { deleted: false, header: false, column: 0, cells: 0, deletedCells: 0 }
    table.rowsSeen++
  }

  /** The row's w:tblHeader. */
  headerRow(value: boolean): void {
    const row = this.open.at(-1)?.row
    if (row) row.header = value
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
    const hidden = row.deleted || (row.cells > 0 && row.deletedCells === row.cells)
    table!.recorded.push(hidden ? -1 : row.cells - row.deletedCells)
    if (hidden) return true
    if (table!.headerRows === table!.rowsShown && (row.header || table!.rowsShown === 0)) table!.headerRows++
    table!.rowsShown++
    return false
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
