import type { NamespaceOf } from './docx-names'
import { on } from './docx-styles'

// A picture's alternative text, for the DOCX rewrite (docx-rewrite.ts) to write where the picture
// stands. A picture holds no text, but its description (wp:docPr descr, set in Word's Alt Text
// pane; the older title when there is none) is what a screen reader reads out for it, and often
// all a figure says in words: it is read as "[Image: …]", as a chart is read under "[Chart: …]".
// Left out: a picture marked decorative (Word's "Mark as decorative", adec:decorative), whose
// text screen readers skip, and every drawing that is not a picture (a chart, read from its own
// part by charts.ts; a text box or shape, whose text officeparser reads; a group or canvas).
//
// A drawing hidden in Word's Selection pane (`hidden="1"` on its wp:docPr; on the wp:anchor or
// wp:inline holding it too) shows nothing: not its picture, nor its text box, SmartArt or chart.
// Hidden content is a prompt-injection vector (as hidden text is, docx-rewrite.ts, and a PPTX's
// hidden shapes, hidden-shapes.ts), so the rewrite drops such a drawing whole, as it drops deleted
// content; and likewise a legacy VML shape (in w:pict, or an AlternateContent Fallback Word shows)
// whose CSS style says `visibility:hidden`, with the text box it holds.

const WORDPROCESSING_DRAWING = 'http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing'
const DRAWINGML = 'http://schemas.openxmlformats.org/drawingml/2006/main'
const PICTURE = 'http://schemas.openxmlformats.org/drawingml/2006/picture'
const DECORATIVE = 'http://schemas.microsoft.com/office/drawing/2017/decorative'
const VML = 'urn:schemas-microsoft-com:vml'

/** The local name of `qname` and the namespace it is in where it stands. */
function nameOf(qname: string, namespaceOf: NamespaceOf): { local: string; uri: string | undefined } {
  const colon = qname.indexOf(':')
  return { local: qname.slice(colon + 1), uri: namespaceOf(colon < 0 ? '' : qname.slice(0, colon)) }
}

/** Whether a `hidden` attribute (xsd:boolean, "1" or "true") hides: all but an explicit "0", "false" (or "off") does, erring on the side of hiding. */
const hides = (value: string | undefined) => value !== undefined && on(value.trim())

/** Whether an element is a VML shape (or group, or any VML element) that its style hides: `visibility:hidden`, the last declaration of it winning, as in CSS. */
export function hiddenVml(qname: string, attributes: Record<string, string>, namespaceOf: NamespaceOf): boolean {
  if (attributes.style === undefined || nameOf(qname, namespaceOf).uri !== VML) return false
  let hidden = false
  for (const declaration of attributes.style.split(';')) {
    const colon = declaration.indexOf(':')
    if (colon >= 0 && declaration.slice(0, colon).trim().toLowerCase() === 'visibility') hidden = declaration.slice(colon + 1).trim().toLowerCase() === 'hidden'
  }
  return hidden
}

interface Drawing {
  /** The depth of its w:drawing: its own wp:docPr and a:graphicData stand at fixed depths below it. */
  depth: number
  text?: string
  picture: boolean
  decorative: boolean
  hidden: boolean
}

/** The w:drawing elements open as a part is read, innermost last (a text box's picture is inside its shape's drawing). */
export class OpenDrawings {
  private readonly open: Drawing[] = []

  /** A w:drawing starts at `depth`. */
  start(depth: number): void {
    this.open.push({ depth, picture: false, decorative: false, hidden: false })
  }

  /**
   * An element inside the innermost open drawing, by its name as written and the namespaces where it
   * stands. Returns the depth of the drawing's w:drawing when this element hides it (the first time):
   * its docPr and its anchor come before its graphic, so the drawing is known hidden before
   * anything in it is read.
   */
  element(qname: string, attributes: Record<string, string>, depth: number, namespaceOf: NamespaceOf): number | undefined {
    const drawing = this.open.at(-1)
    if (drawing === undefined) return undefined
    const { local, uri } = nameOf(qname, namespaceOf)
    // w:drawing > wp:inline | wp:anchor > wp:docPr, and > a:graphic > a:graphicData.
    const placement = (local === 'inline' || local === 'anchor') && uri === WORDPROCESSING_DRAWING && depth === drawing.depth + 1
    const properties = local === 'docPr' && uri === WORDPROCESSING_DRAWING && depth === drawing.depth + 2
    if (properties) {
      drawing.text = [attributes.descr, attributes.title].map(text => text?.replace(/\s+/g, ' ').trim()).find(text => text !== undefined && text !== '')
    } else if (local === 'graphicData' && uri === DRAWINGML && depth === drawing.depth + 3) drawing.picture = attributes.uri === PICTURE
    else if (local === 'decorative' && uri === DECORATIVE && on(attributes.val)) drawing.decorative = true
    if ((placement || properties) && hides(attributes.hidden) && !drawing.hidden) {
      drawing.hidden = true
      return drawing.depth
    }
    return undefined
  }

  /** The innermost drawing ends: the alternative text it shows, when it is a picture with one and not decorative. */
  end(): string | undefined {
    const drawing = this.open.pop()
    return drawing?.picture && !drawing.decorative && !drawing.hidden ? drawing.text : undefined
  }

  get inside(): boolean {
    return this.open.length > 0
  }
}
