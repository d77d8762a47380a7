import type { NamespaceOf } from './docx-names'
import { on } from './docx-styles'
import { shapeOwning, type ShapeKinds } from './hidden-shapes'

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
// A shape, picture or graphic frame inside a drawing (a group's, wpg:wgp, or a canvas's, wpc:wpc)
// is hidden on its own non-visual properties (wps:wsp > wps:cNvPr, pic:pic > pic:nvPicPr >
// pic:cNvPr, wpg:graphicFrame > wpg:cNvPr), by namespace whatever the prefix, by the rule PowerPoint
// hides a slide's shapes by (hidden-shapes.ts shapeOwning): that element goes, with its text, a
// picture's alternative text and a frame's chart; the drawing's own graphic (a:graphicData's
// child) hidden so, the whole drawing goes.

const WORDPROCESSING_DRAWING = 'http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing'
const DRAWINGML = 'http://schemas.openxmlformats.org/drawingml/2006/main'
const PICTURE = 'http://schemas.openxmlformats.org/drawingml/2006/picture'
const DECORATIVE = 'http://schemas.microsoft.com/office/drawing/2017/decorative'
const VML = 'urn:schemas-microsoft-com:vml'
/** The namespaces of a drawing's shapes: Word's shapes, groups and canvases, and pictures (transitional and strict). */
const SHAPE_NAMESPACES = new Set([
  'http://schemas.microsoft.com/office/word/2010/wordprocessingShape',
  'http://schemas.microsoft.com/office/word/2010/wordprocessingGroup',
  'http://schemas.microsoft.com/office/word/2010/wordprocessingCanvas',
  PICTURE,
  'http://purl.oclc.org/ooxml/drawingml/picture',
])
/** A drawing's shapes and where their own non-visual properties stand (a canvas has none: it shows what it holds). */
const SHAPES: ShapeKinds = new Map([
  ['wsp', ''],
  ['wgp', ''],
  ['grpSp', ''],
  ['graphicFrame', ''],
  ['pic', 'nvPicPr'],
])

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
  /** The local names of the elements open in them, by depth: '' for one outside the shapes' namespaces. */
  private readonly names: string[] = []

  /** A w:drawing starts at `depth`. */
  start(depth: number): void {
    this.open.push({ depth, picture: false, decorative: false, hidden: false })
    this.names.length = depth
    this.names.push('')
  }

  /**
   * An element inside the innermost open drawing, by its name as written and the namespaces where it
   * stands. Returns the depth of what this element hides: the drawing's w:drawing (the first time),
   * or a shape in it. Its docPr and its anchor come before its graphic, and a shape's non-visual
   * properties first in it, so what is hidden is known before anything in it is read.
   */
  element(qname: string, attributes: Record<string, string>, depth: number, namespaceOf: NamespaceOf): number | undefined {
    const drawing = this.open.at(-1)
    if (drawing === undefined) return undefined
    const { local, uri } = nameOf(qname, namespaceOf)
    const shapeName = uri !== undefined && SHAPE_NAMESPACES.has(uri) ? local : ''
    this.names.length = depth
    this.names.push(shapeName)
    // w:drawing > wp:inline | wp:anchor > wp:docPr, and > a:graphic > a:graphicData.
    const placement = (local === 'inline' || local === 'anchor') && uri === WORDPROCESSING_DRAWING && depth === drawing.depth + 1
    const properties = local === 'docPr' && uri === WORDPROCESSING_DRAWING && depth === drawing.depth + 2
    if (properties) {
      drawing.text = [attributes.descr, attributes.title].map(text => text?.replace(/\s+/g, ' ').trim()).find(text => text !== undefined && text !== '')
    } else if (local === 'graphicData' && uri === DRAWINGML && depth === drawing.depth + 3) drawing.picture = attributes.uri === PICTURE
    else if (local === 'decorative' && uri === DECORATIVE && on(attributes.val)) drawing.decorative = true
    // w:drawing > wp:inline | wp:anchor > a:graphic > a:graphicData > its graphic: a shape there is the drawing's own.
    const shape = shapeName === 'cNvPr' && hides(attributes.hidden) ? shapeOwning(this.names, depth, SHAPES) : undefined
    if (shape !== undefined && shape > drawing.depth + 4) return shape
    if ((placement || properties || shape !== undefined) && hides(attributes.hidden) && !drawing.hidden) {
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
