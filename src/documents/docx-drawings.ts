import type { NamespaceOf } from './docx-names'
import { on } from './docx-styles'

// A picture's alternative text, for the DOCX rewrite (docx-rewrite.ts) to write where the picture
// stands. A picture holds no text, but its description (wp:docPr descr, set in Word's Alt Text
// pane; the older title when there is none) is what a screen reader reads out for it, and often
// all a figure says in words: it is read as "[Image: …]", as a chart is read under "[Chart: …]".
// Left out: a picture marked decorative (Word's "Mark as decorative", adec:decorative), whose
// text screen readers skip, and every drawing that is not a picture (a chart, read from its own
// part by charts.ts; a text box or shape, whose text officeparser reads; a group or canvas).

const WORDPROCESSING_DRAWING = 'http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing'
const DRAWINGML = 'http://schemas.openxmlformats.org/drawingml/2006/main'
const PICTURE = 'http://schemas.openxmlformats.org/drawingml/2006/picture'
const DECORATIVE = 'http://schemas.microsoft.com/office/drawing/2017/decorative'

interface Drawing {
  /** The depth of its w:drawing: its own wp:docPr and a:graphicData stand at fixed depths below it. */
  depth: number
  text?: string
  picture: boolean
  decorative: boolean
}

/** The w:drawing elements open as a part is read, innermost last (a text box's picture is inside its shape's drawing). */
export class OpenDrawings {
  private readonly open: Drawing[] = []

  /** A w:drawing starts at `depth`. */
  start(depth: number): void {
    this.open.push({ depth, picture: false, decorative: false })
  }

  /** An element inside the innermost open drawing, by its name as written and the namespaces where it stands. */
  element(qname: string, attributes: Record<string, string>, depth: number, namespaceOf: NamespaceOf): void {
    const drawing = this.open.at(-1)
    if (drawing === undefined) return
    const colon = qname.indexOf(':')
    const local = qname.slice(colon + 1)
    const uri = namespaceOf(colon < 0 ? '' : qname.slice(0, colon))
    // w:drawing > wp:inline | wp:anchor > wp:docPr, and > a:graphic > a:graphicData.
    if (local === 'docPr' && uri === WORDPROCESSING_DRAWING && depth === drawing.depth + 2) {
      drawing.text = [attributes.descr, attributes.title].map(text => text?.replace(/\s+/g, ' ').trim()).find(text => text !== undefined && text !== '')
    } else if (local === 'graphicData' && uri === DRAWINGML && depth === drawing.depth + 3) drawing.picture = attributes.uri === PICTURE
    else if (local === 'decorative' && uri === DECORATIVE && on(attributes.val)) drawing.decorative = true
  }

  /** The innermost drawing ends: the alternative text it shows, when it is a picture with one and not decorative. */
  end(): string | undefined {
    const drawing = this.open.pop()
    return drawing?.picture && !drawing.decorative ? drawing.text : undefined
  }

  get inside(): boolean {
    return this.open.length > 0
  }
}
