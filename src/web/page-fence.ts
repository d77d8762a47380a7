import { cutText } from '../lib/characters'
import { fenceMarker } from '../lib/ids'
import { oneLine } from './page-text'
import type { FetchedPage } from './read-page'

/**
 * The fence around web text shown to a model (the hosted web block in chat, svc.web_fetch's text):
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
}
