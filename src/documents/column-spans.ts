// The column records of a workbook, counted before SheetJS reads it. With cellStyles (which
// extractWorkbook needs to read hidden rows and columns), SheetJS keeps an object for every column
// a column record spans (an XLSX's <col min max>, a binary part's BrtColInfo, an XLS's COLINFO),
// one copy per column, whatever the record says: a one-cell workbook whose <col> ends at column
// 10,000,000 took 1.7 s and 1.1 GB. A real sheet's records span its width at most (16,384 columns).

/** The most columns a workbook's column records may span in all: 64 sheets' full width (~110 bytes each in SheetJS, ~115 MB). */
export const MAX_COLUMN_SPANS = 64 * 16_384
export const tooManyColumns = `the workbook's column records span more than ${MAX_COLUMN_SPANS.toLocaleString('en')} columns (a real sheet's span at most its 16,384); split it into smaller workbooks`

/** The columns SheetJS makes of a record from `first` to `last` (it fills each one from last down to first). */
export function columnSpan(first: number, last: number): number {
  return Number.isFinite(first) && Number.isFinite(last) && last >= first ? last - first + 1 : 0
}

// SheetJS's patterns: a <col> element (colregex) and an attribute in it (parsexmltag's attregexg).
const COL = /<(?:\w+:)?col\b[^<>]*[/]?>/g
const ATTRIBUTE = /\s([^"\s?>/]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^'">\s]+))/g

/**
 * The columns an XML part's <col> elements span, counted up to just past `budget`. Each element's
 * span is taken from its widest reading: its least `min` to its greatest `max` among the
 * attributes SheetJS could take for them (parsexmltag keeps the last one, by a name stripped of its
 * prefix, of an `_suffix` and of case), each read as SheetJS reads it (parseInt).
 */
export function xmlColumnSpans(text: string, budget: number): number {
  let spans = 0
  COL.lastIndex = 0
  for (let element = COL.exec(text); element !== null && spans <= budget; element = COL.exec(text)) {
    let least = Number.POSITIVE_INFINITY
    let greatest = Number.NEGATIVE_INFINITY
    ATTRIBUTE.lastIndex = 0
    for (let attribute = ATTRIBUTE.exec(element[0]); attribute !== null; attribute = ATTRIBUTE.exec(element[0])) {
      const name = localName(attribute[1]!)
      if (name !== 'min' && name !== 'max') continue
      const value = Number.parseInt(attribute[2] ?? attribute[3] ?? attribute[4] ?? '', 10)
      if (Number.isNaN(value)) continue
      if (name === 'min') least = Math.min(least, value)
      else greatest = Math.max(greatest, value)
    }
    spans += columnSpan(least, greatest)
  }
  return spans
}

/** An attribute's name as parsexmltag keys it, lower-cased: after its prefix, or before an `_` past its first character. */
function localName(name: string): string {
  const colon = name.indexOf(':')
  if (colon >= 0) return name.slice(colon + 1).toLowerCase()
  const underscore = name.indexOf('_')
  return (underscore > 0 ? name.slice(0, underscore) : name).toLowerCase()
}
