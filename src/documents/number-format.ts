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
 * numbers, `General;-General;` zeros. The section is Excel's (excelSection). SheetJS reads a format
 * that starts with General as General whole, sections and all (`General;;;` showed every value),
 * though it applies the others' empty sections.
 */
export function emptySection(format: string, value: number | string): boolean {
  const chosen = excelSection(format, value)
  return chosen !== undefined && !chosen.lone && chosen.section.replace(COLOUR, '').trim() === ''
}

/**
 * A value as Excel shows it in a format SheetJS reads otherwise, or undefined for SheetJS's text to
 * stand: one starting with General, which SheetJS takes as General whole (`General;(General);"zero";"T:"@`
 * showed -5, 0 and "note" as they are, where Excel shows (5), zero and T:note), or one whose section
 * for the value holds General elsewhere, which SheetJS fills with the signed value (`0;(General)`
 * showed (-5)). The section is Excel's (excelSection); one holding General (or, for a text, @) is
 * written with its literal text around the value, General as generalShown writes it; any other
 * section of a format starting with General is applied by SheetJS alone. A negative number shows
 * its absolute value in a section of its own, a minus sign in front of the one section there is.
 */
export function generalSectionShown(format: string, value: number | string): string | undefined {
  const chosen = excelSection(format, value)
  // SSF_isgeneral: General at the very start of the code.
  const readAsGeneral = /^general/i.test(format)
  if (chosen === undefined) return undefined
  if (typeof value === 'string') return readAsGeneral ? written(chosen.section, value).text : undefined
  const sign = value < 0 && chosen.lone ? '-' : ''
  const size = Math.abs(value)
  if (chosen.section.includes('@')) return undefined
  const general = written(chosen.section, generalShown(size))
  if (general.placed) return sign + general.text
  if (!readAsGeneral) return undefined
  try {
    return sign + XLSX.SSF.format(chosen.section, size)
  } catch {
    return undefined
  }
}

/**
 * The section of `format` Excel applies to `value`, split as Excel splits them (a quoted `;` kept),
 * and whether it is the one section numbers have (`lone`): a number takes the first,
 * with two the second when negative, with three or four the second when negative and the third
 * when zero (SheetJS's reading: with fewer than four, a last section holding @ is for text); a text
 * takes the fourth, or that last one, or a lone one holding @. Undefined for a text with no section
 * of its own (it shows as it is), and for a format with conditions (`[>100]`), left to SheetJS, which
 * applies them.
 */
function excelSection(format: string, value: number | string): { section: string; lone: boolean } | undefined {
  const sections = formatSections(format, true)
  const count = sections.length
  if (count > 4 || sections.some(section => CONDITION.test(section))) return undefined
  const textLast = count > 1 && count < 4 && sections.at(-1)!.includes('@')
  if (typeof value === 'string') {
    const section = count === 4 ? sections[3] : textLast || (count === 1 && sections[0]!.includes('@')) ? sections.at(-1) : undefined
    return section === undefined ? undefined : { section, lone: false }
  }
  if (textLast) sections.pop()
  if (sections.length === 1) return { section: sections[0]!, lone: true }
  return { section: value < 0 ? sections[1]! : sections.length === 2 || value > 0 ? sections[0]! : sections[2]!, lone: false }
}

/**
 * `section` as Excel writes it with `shown` in place of its General or @ (`placed` whether it holds
 * one): quoted text and a \-escaped character as they are, a currency (`[$€-407]`) its symbol, a
 * colour or other bracket nothing, _x (a space as wide as x) a space, *x (x repeated to fill the
 * column) nothing, any other character as it is.
 */
function written(section: string, shown: string): { text: string; placed: boolean } {
  let text = ''
  let placed = false
  for (let i = 0; i < section.length; i++) {
    const c = section[i]!
    if (c === '"') {
      const end = section.indexOf('"', i + 1)
      const stop = end < 0 ? section.length : end
      text += section.slice(i + 1, stop)
      i = stop
    } else if (c === '\\') text += section[++i] ?? ''
    else if (c === '_') text += section[++i] === undefined ? '' : ' '
    else if (c === '*') i++
    else if (c === '[') {
      const end = section.indexOf(']', i)
      const inside = section.slice(i + 1, end < 0 ? section.length : end)
      if (inside.startsWith('$')) text += inside.slice(1).split('-')[0]
      i = end < 0 ? section.length : end
    } else if (c === '@' || section.slice(i, i + 7).toLowerCase() === 'general') {
      text += shown
      placed = true
      if (c !== '@') i += 6
    } else text += c
  }
  return { text, placed }
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
