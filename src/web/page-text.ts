/**
 * Small text helpers shared by the page reader and the search backends. They live apart from
 * ./html-to-text.ts so that a search result's date does not load htmlparser2: the HTML walk is
 * imported on the first HTML page the web fetch reads (./read-page.ts).
 */

const LOCAL_DATE_TIME = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?$/

/** A date string as ISO 8601 UTC, or null when it does not parse (or is absurd). */
export function toIsoDate(value: string): string | null {
  let text = value.trim()
  // An ISO date-time without an offset (SearXNG's publishedDate, Brave's page_age, meta tags):
  // Date.parse would read it in the host's time zone; it is read as UTC, whatever TZ says.
  if (LOCAL_DATE_TIME.test(text)) text = `${text.replace(' ', 'T')}Z`
  const time = Date.parse(text)
  if (!Number.isFinite(time) || time < Date.UTC(1991, 0, 1) || time > Date.UTC(2200, 0, 1)) return null
  return new Date(time).toISOString()
}

/** Collapses runs of spaces within lines and of blank lines between them. */
export function clean(text: string): string {
  return text
    .replace(/[ \t\f\v\r\u00a0]+/g, ' ')
    .replace(/ *\n */g, '\n')
    .replace(/\n- *(?=\n)/g, '')
    .replace(/\n{3,}/g, '\n\n')
    .trim()
}
