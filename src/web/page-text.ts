/**
 * Small text helpers shared by the page reader and the search backends. They live apart from
 * ./html-to-text.ts so that a search result's date does not load htmlparser2: the HTML walk is
 * imported on the first HTML page the web fetch reads (./read-page.ts).
 */

// ISO dates alone (2024-01-15, 2024-01, 2024): Date.parse reads these as UTC already.
const DATE_ONLY = /^\d{4}(?:-\d{2}(?:-\d{2})?)?$/
// An explicit zone at the end: Z, an offset after a time of day, or a name Date.parse knows (with
// an offset, and Date#toString's parenthesized name, as in "GMT+0100 (Central European Time)").
const ZONE = /(?:[Zz]|\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s?[+-]\d{2}(?::?\d{2})?|\b(?:UTC|GMT|UT|[ECMP][SD]T)(?:[+-]\d{2}:?\d{2})?)\s*(?:\([^()]*\))?$/

/**
 * A date string as ISO 8601 UTC, or null when it does not parse (or is absurd). One without a
 * zone (SearXNG's publishedDate, Brave's page_age, meta tags, "January 15, 2024") is read as UTC:
 * Date.parse would read it in the host's time zone, so one answer would give other instants under
 * another TZ.
 */
export function toIsoDate(value: string): string | null {
  const text = value.trim()
  let time = Date.parse(text)
  if (!Number.isFinite(time)) return null
  if (!DATE_ONLY.test(text) && !ZONE.test(text)) time -= new Date(time).getTimezoneOffset() * 60_000
  if (time < Date.UTC(1991, 0, 1) || time > Date.UTC(2200, 0, 1)) return null
  return new Date(time).toISOString()
}

/**
 * A text page (plain text, Markdown, YAML, JSON, CSV, XML…) as written: its indentation and runs
 * of spaces carry meaning, so only line endings become "\n", control characters other than tab
 * and newline are dropped (a form feed's page break, a stray escape code), and so are blank lines
 * at the start and whitespace at the end.
 */
export function plainText(text: string): string {
  return text.replace(/\r\n?/g, '\n').replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, '').replace(/^(?:[ \t]*\n)+/, '').trimEnd()
}

/**
 * A field shown on one line (a page's title, a search result's title, snippet or site name): what
 * a page or a search backend puts there (og:title's `&#10;`, a Brave profile name's newline, an
 * escape code) must not start a line of its own where the field is quoted, as in the hosted web
 * block. Every run of whitespace (line breaks and tabs too) becomes one space; control characters
 * (C0, DEL, C1) go.
 */
export function oneLine(text: string): string {
  return text.replace(/[\u0000-\u0008\u000e-\u001f\u007f-\u0084\u0086-\u009f]/g, '').replace(/[\s\u0085]+/g, ' ').trim()
}

/** Collapses runs of spaces within lines and of blank lines between them (HTML's text, a PDF's). */
export function clean(text: string): string {
  return text
    .replace(/[ \t\f\v\r\u00a0]+/g, ' ')
    .replace(/ *\n */g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim()
}
