import { bandSize, CONDITIONS, on, type HiddenStyles } from './docx-styles'

// Which of a table style's conditional formats (w:tblStylePr) apply to a cell, as Word applies
// them: the first and last row and column when the table's look (w:tblLook) switches them on, the
// row and column bands unless it switches them off (its defaults: bands only), the first row's
// format taken by the header rows Word repeats (w:tblHeader) after it too, banding counted after a
// first row or column that has its own format and skipping a first or last one that does (as
// LibreOffice reads Word's tables), a band as many rows or columns as the style or the table says
// (w:tblStyleRowBandSize), and a corner cell's format where its row's and column's both apply.
// Where they overlap, the later in Office's order (MS-OI29500 2.1.252) decides: the whole table, row
// bands, column bands, first and last column, first and last row, corners. So a style hiding its
// header row hides that row alone, never the rows under it.

export interface TableLook {
  firstRow: boolean
  lastRow: boolean
  firstColumn: boolean
  lastColumn: boolean
  rowBands: boolean
  columnBands: boolean
  /** The table's own band sizes, over its style's. */
  rowBand?: number
  columnBand?: number
}

export const DEFAULT_LOOK: Readonly<TableLook> = { firstRow: false, lastRow: false, firstColumn: false, lastColumn: false, rowBands: true, columnBands: true }

/** A w:tblLook: its named switches, else the bits of its w:val (the transitional form), else the defaults. */
export function readLook(attributes: Record<string, string>, look: TableLook): TableLook {
  const bits = /^[0-9a-fA-F]{1,4}$/.test(attributes['w:val'] ?? '') ? Number.parseInt(attributes['w:val']!, 16) : undefined
  const flag = (name: string, bit: number, otherwise: boolean) => {
    const value = attributes[`w:${name}`]
    return value !== undefined ? on(value) : bits !== undefined ? (bits & bit) !== 0 : otherwise
  }
  return {
    ...look,
    firstRow: flag('firstRow', 0x20, false),
    lastRow: flag('lastRow', 0x40, false),
    firstColumn: flag('firstColumn', 0x80, false),
    lastColumn: flag('lastColumn', 0x100, false),
    rowBands: !flag('noHBand', 0x200, false),
    columnBands: !flag('noVBand', 0x400, false),
  }
}

/** A table's own band size (w:tblStyleRowBandSize or w:tblStyleColBandSize in its w:tblPr). */
export function withBand(look: TableLook, name: string, value: string | undefined): TableLook {
  return name === 'w:tblStyleRowBandSize' ? { ...look, rowBand: bandSize(value) } : { ...look, columnBand: bandSize(value) }
}

/** Where a cell stands among the rows and cells Word's final view shows. */
export interface CellPlace {
  row: number
  rows: number
  /** The rows from the first that take the first row's format, as far as they are known. */
  headerRows: number
  column: number
  columns: number
}

/**
 * The table style's setting for a cell (`style` its table's w:tblStyle, '' for none: the default
 * table style's; undefined outside a table). Without its place (text in a table but in no cell,
 * which Word does not show either), hidden when any conditional format hides: shown the less.
 */
export function tableHidden(styles: HiddenStyles, style: string | undefined, look: TableLook, place: CellPlace | undefined): boolean | undefined {
  if (style === undefined) return undefined
  const setting = styles.table.get(style) ?? styles.defaultTable
  if (setting === undefined || setting.conditions.size === 0) return setting?.value
  if (place === undefined) return [...setting.conditions.values()].includes(true) ? true : setting.value
  const firstRow = look.firstRow && place.row < place.headerRows
  const lastRow = look.lastRow && place.row === place.rows - 1
  const firstCol = look.firstColumn && place.column === 0
  const lastCol = look.lastColumn && place.column === place.columns - 1
  const oddBand = (index: number, size = 1) => Math.floor(index / size) % 2 === 1
  const applies: Record<string, boolean> = {
    wholeTable: true,
    [oddBand(place.column - (look.firstColumn ? 1 : 0), look.columnBand ?? setting.columnBand) ? 'band2Vert' : 'band1Vert']: look.columnBands && !firstCol && !lastCol,
    [oddBand(place.row - (look.firstRow ? place.headerRows : 0), look.rowBand ?? setting.rowBand) ? 'band2Horz' : 'band1Horz']: look.rowBands && !firstRow && !lastRow,
    firstRow,
    lastRow,
    firstCol,
    lastCol,
    nwCell: firstRow && firstCol,
    neCell: firstRow && lastCol,
    swCell: lastRow && firstCol,
    seCell: lastRow && lastCol,
  }
  let hidden = setting.value
  for (const type of CONDITIONS) if (applies[type] === true && setting.conditions.has(type)) hidden = setting.conditions.get(type)
  return hidden
}
