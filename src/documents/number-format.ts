import * as XLSX from '@e965/xlsx'

// Number formats as Excel applies them, where SheetJS's formatter (SSF) differs, shared by the
// workbook reader (office.ts) and the chart reader (charts.ts).

/** The longest number format code a workbook may declare: Excel's own limit. */
const MAX_FORMAT_CODE = 255
/** The most text placeholders (@) one format may hold: each repeats the cell's whole text. */
const MAX_TEXT_PLACEHOLDERS = 4

/**
 * Why SheetJS would make huge text of `code` (formatting every value with it), or undefined: a
 * literal past Excel's 255 characters (2,000 cells of a 50,000-character one took 2 GB from a
 * 2 KB upload), or the text placeholder @ many times over (255 of them on a long shared string).
 */
export function hugeFormat(code: string): string | undefined {
  if (code.length > MAX_FORMAT_CODE) return `longer than Excel's ${MAX_FORMAT_CODE} characters`
  if (code.split('@').length - 1 > MAX_TEXT_PLACEHOLDERS) return `that repeats its text placeholder (@) more than ${MAX_TEXT_PLACEHOLDERS} times`
  return undefined
}

/**
 * A negative number as Excel shows it in a format with no section of its own for negatives, or
 * undefined for SheetJS's text to stand. Excel rounds half away from zero (-2.5 in `0` is -3); SheetJS
 * formats the signed value and rounds with Math.round, half toward +∞ (-2.5 is -2, -0.125 in `0.00`
 * is -0.12), while a negative section (`0;(0)`, `0;[Red]-0`) it fills with the absolute value, as
 * Excel does. So the format is applied here to the absolute value, as SheetJS does for the positive
 * mirror (binary representation included: -2.675 in `0.00` is -2.68 as 2.675 is 2.68), and the sign
 * put in front, where SheetJS moves it too (`"Qty: "0`: -Qty: 3). A value that rounds to zero keeps
 * its sign, -0.4 in `0` is -0, as Excel shows it (LibreOffice shows 0; SheetJS already shows -0 in
 * `#,##0`). Dates are left out (no date is negative), and so are conditional sections ([<0]).
 */
export function negativeShown(format: string, value: number): string | undefined {
  if (XLSX.SSF.is_date(format)) return undefined
  const sections = formatSections(format)
  // SheetJS's reading (choose_fmt): a last section holding @ is for text, unless there are four;
  // a lone section holding @ is General for numbers.
  if (sections.length > 1 && sections.length < 4 && sections[sections.length - 1]!.includes('@')) sections.pop()
  if (sections.length !== 1 || sections[0]!.includes('@') || /\[[<>=]/.test(sections[0]!)) return undefined
  try {
    return '-' + XLSX.SSF.format(format, -value)
  } catch {
    return undefined
  }
}

/**
 * Whether Excel shows `value` as nothing because the section of `format` that applies to it is
 * empty (a colour alone shows nothing either): `;;;` hides every value, `0;;` all but positive
 * numbers, `General;-General;` zeros. A number takes the first section, or with two the second
 * when negative, with three or four the second when negative and the third when zero; a text
 * takes the fourth. SheetJS reads a format that starts with General as General whole, sections and
 * all (`General;;;` showed every value), though it applies the others' empty sections. Sections
 * are split as Excel splits them, a quoted `;` kept; a format with conditions (`[>100]`) is left to
 * SheetJS, which applies them.
 */
export function emptySection(format: string, value: number | string): boolean {
  const sections = formatSections(format, true)
  if (sections.length < 2 || sections.length > 4 || sections.some(section => CONDITION.test(section))) return false
  let section: string | undefined
  if (typeof value === 'string') section = sections[3]
  else {
    // SheetJS's reading, as in negativeShown: with fewer than four sections, a last one holding @ is for text.
    if (sections.length < 4 && sections.at(-1)!.includes('@')) sections.pop()
    if (sections.length === 1) return false
    section = value < 0 ? sections[1] : sections.length === 2 || value > 0 ? sections[0] : sections[2]
  }
  return section !== undefined && section.replace(COLOUR, '').trim() === ''
}

const CONDITION = /\[[<>=]/
const COLOUR = /\[(?:black|blue|cyan|green|magenta|red|white|yellow|colou?r\s*\d{1,2})\]/gi

/**
 * A format code's sections as SheetJS splits them (SSF_split_fmt): at every `;`, inside quotes too
 * (it is SheetJS's reading that decides which section it applies), the character after \, _ (a
 * space as wide as it) or * (it repeated to fill) taken as theirs. With `quotesHold`, as Excel
 * splits them: a `;` inside quotes is the section's text.
 */
function formatSections(format: string, quotesHold = false): string[] {
  const sections: string[] = []
  let start = 0
  for (let i = 0; i < format.length; i++) {
    const c = format[i]
    if (c === '\\' || c === '_' || c === '*') i++
    else if (c === '"' && quotesHold) {
      const end = format.indexOf('"', i + 1)
      i = end < 0 ? format.length : end
    } else if (c === ';') {
      sections.push(format.slice(start, i))
      start = i + 1
    }
  }
  sections.push(format.slice(start))
  return sections
}

/**
 * A number in General as Excel shows it, with the gateway's one exception: a whole number keeps
 * every digit (Excel shows 4006381333931 as 4.00638E+12; a barcode or an order id would lose
 * digits). Otherwise SheetJS's General, but for a number of 11 integer digits: SheetJS cuts its
 * decimals off where Excel rounds them, half away from zero (12345678901.5 is 12345678902; one
 * rounding up to 12 digits shows as Excel shows it, 1E+11).
 */
export function generalShown(value: number): string {
  if (Number.isSafeInteger(value)) return String(value)
  const size = Math.abs(value)
  if (size >= 1e10 && size < 1e11) {
    const rounded = Math.sign(value) * Math.round(size)
    return Math.abs(rounded) < 1e11 ? String(rounded) : XLSX.SSF.format('General', rounded)
  }
  return XLSX.SSF.format('General', value)
}

/**
 * The ISO form of a date or time format SheetJS cannot apply (`dd.mm.yyyy`, refused for its
 * dots): the date, the time of day, or both, as the format shows them (a date format shows no
 * time, whatever the value holds; seconds only when it shows them; hours past a day when it counts
 * them, `[h]`). Undefined when the format shows neither.
 */
export function isoDateFormat(format: string): string | undefined {
  // What is shown as written (quoted, escaped, padding and fill characters) or is a colour or condition is not a part.
  const bare = format.replace(/"[^"]*"|\\.|_.|\*./g, '').replace(/\[(?![hms]+\])[^\]]*\]/gi, '').toLowerCase()
  const tokens = bare.match(/am\/pm|a\/p|\[[hms]+\]|([a-z])\1*/g) ?? []
  const hours = (token: string | undefined) => token !== undefined && /^\[?h/.test(token)
  const secondsToken = (token: string | undefined) => token !== undefined && /^\[?s/.test(token)
  let date = false
  let time = false
  tokens.forEach((token, at) => {
    if (/^[ydegb]/.test(token)) date = true
    else if (hours(token) || secondsToken(token) || token.includes('/') || token.startsWith('[m')) time = true
    // An m run is minutes after hours or before seconds, else the month.
    else if (token[0] === 'm') {
      if (token.length <= 2 && (hours(tokens[at - 1]) || secondsToken(tokens[at + 1]))) time = true
      else date = true
    }
  })
  const clock = `${tokens.some(token => token.startsWith('[h')) ? '[h]' : 'hh'}:mm${tokens.some(secondsToken) ? ':ss' : ''}`
  return date && time ? `yyyy-mm-dd ${clock}` : date ? 'yyyy-mm-dd' : time ? clock : undefined
}
