import { cutText } from '../lib/characters'
import { fenceMarker } from '../lib/ids'
import { oneLine } from './page-text'
import type { FetchedPage } from './read-page'
import type { SearchResult } from './search'

/**
 * The fence around web text shown to a model (the hosted web block in chat, svc.web_fetch's and
 * svc.web_search's text):
 * a random marker (fenceMarker) names the whole and each page's section, so text from the web
 * cannot forge the end of its section, or a section of the gateway's, without knowing the marker.
 * Every piece of web text inside goes through `text` or `field`.
 */
export class PageFence {
  readonly marker = fenceMarker()

  /** Web text inside the fence, the marker removed (again, should a removal join one more). */
  text(value: string): string {
    let text = value
    while (text.includes(this.marker)) text = text.replaceAll(this.marker, '')
    return text
  }

  /** A field quoted on one line (a URL, a title, a reason): oneLine, the marker removed, cut to `most`. */
  field(value: string, most = Number.POSITIVE_INFINITY): string {
    return cutText(this.text(oneLine(value)), most)
  }

  /** Page `number`'s section: its URL, title and date (each field cut to `fieldChars`), then `content`. */
  page(number: number, page: FetchedPage, content: string, fieldChars?: number): string[] {
    return [
      `<<<page ${number} ${this.marker}>>>`,
      `URL: ${this.field(page.url, fieldChars)}`,
      `Title: ${this.field(page.title, fieldChars)}`,
      `Last updated: ${page.lastUpdated ?? 'unknown'}`,
      '',
      this.text(content),
      `<<<end page ${number} ${this.marker}>>>`,
    ]
  }

  /**
   * A web search's section: the query, `note` when given, then each result on two lines, its
   * title, URL, date and site (each field cut to `fieldChars`), then its snippet (cut to
   * `snippetChars`). Titles and snippets are the result pages' own text, as untrusted as a page.
   */
  search(query: string, results: SearchResult[], options: { fieldChars?: number; snippetChars?: number; note?: string } = {}): string[] {
    const { fieldChars, snippetChars = Number.POSITIVE_INFINITY } = options
    const lines = [`<<<search ${this.marker}>>>`, `Query: ${this.field(query)}`]
    if (options.note) lines.push(options.note)
    if (results.length === 0) lines.push('No results.')
    for (const [index, result] of results.entries()) {
      const published = result.published ? ` (published ${result.published})` : ''
      lines.push(
        `${index + 1}. ${this.field(result.title, fieldChars)} — ${this.field(result.url, fieldChars)}${published} [${this.field(result.siteName, fieldChars)}]`,
        `   ${cutText(this.text(result.description), snippetChars)}`,
      )
    }
    lines.push(`<<<end search ${this.marker}>>>`)
    return lines
  }
}
