import { getResolvedPDFJS } from 'unpdf'
import type { PDFDocumentProxy, PDFPageProxy } from 'unpdf/pdfjs'

type ContentItem = Awaited<ReturnType<PDFPageProxy['getTextContent']>>['items'][number]
type TextItem = Extract<ContentItem, { str: string }>
type Mark = Exclude<ContentItem, TextItem>
type TextMark = { item: Mark; textBefore: number }
type OperatorList = Awaited<ReturnType<PDFPageProxy['getOperatorList']>>
type Operators = Awaited<ReturnType<typeof getResolvedPDFJS>>['OPS']
export type Layers = Awaited<ReturnType<PDFDocumentProxy['getOptionalContentConfig']>>

/** A piece of page text, as getTextContent gives it. */
interface TextPiece {
  str: string
  hasEOL: boolean
}

/** The document's layers (optional content groups) in their default states, or undefined when it has none. */
export async function documentLayers(document: PDFDocumentProxy): Promise<Layers | undefined> {
  const layers = await document.getOptionalContentConfig()
  return [...layers].length > 0 ? layers : undefined
}

/**
 * The text pieces of a page that a viewer shows: text marked as belonging to a layer that is
 * switched off (`/OC /name BDC … EMC`, the layer an optional content group, or a membership
 * dictionary combining several) is left out, as pdftotext and viewers leave it out, and so is the
 * text of a form XObject that names such a layer in its own dictionary (/OC), which
 * getTextContent reads inline, unmarked (hiddenForms). `items` is getTextContent's answer with
 * includeMarkedContent; `formLayers` whether a form of the document may be so hidden
 * (pdf-form-layers.ts mayHideForms): without, a page whose text marks no layer is read without
 * its operator list.
 */
export async function shownText(page: PDFPageProxy, items: ContentItem[], layers: Layers | undefined, formLayers = false): Promise<TextPiece[]> {
  if (layers === undefined || !(formLayers || items.some(isLayerStart))) return items.filter(isText)
  const { OPS, AnnotationMode } = await getResolvedPDFJS()
  const list = await page.getOperatorList({ annotationMode: AnnotationMode.DISABLE })
  const visible = items.some(isLayerStart) ? layerVisibility(list, items, layers, OPS) : []
  const inHiddenForm = hiddenForms(list, items, layers, OPS)
  const shown: TextPiece[] = []
  // Per open marked-content sequence: whether it lies in a switched-off layer (its own or an enclosing one).
  const hidden: boolean[] = []
  let layer = 0
  // pdf.js marks a new line on the first piece of that line; when that piece is hidden the break
  // is kept, and the space pdf.js put between the hidden text and the next is dropped.
  let lineBreak = false
  for (const item of items) {
    if (isText(item)) {
      if (hidden.at(-1) === true || inHiddenForm(item)) {
        lineBreak ||= item.hasEOL
        continue
      }
      if (lineBreak && !item.hasEOL) {
        if (item.str.trim() === '') continue
        if (shown.length > 0 && !shown.at(-1)!.hasEOL) shown.push({ str: '', hasEOL: true })
      }
      lineBreak = false
      shown.push(item)
    } else if (item.type === 'endMarkedContent') {
      hidden.pop()
    } else {
      const off = isLayerStart(item) && !visible[layer++]
      hidden.push(hidden.at(-1) === true || off)
    }
  }
  return shown
}

function isText(item: ContentItem): item is TextItem {
  return 'str' in item
}

function isLayerStart(item: ContentItem): boolean {
  return !isText(item) && item.type === 'beginMarkedContentProps' && (item as { tag?: unknown }).tag === 'OC'
}

/**
 * Whether each layer start among `items` (in order) is visible. getTextContent names a marked
 * sequence's tag but not its layer (pdf.js keeps an id only for /MCID), so the layers come from the
 * page's operator list, whose marked-content operators are the same ones in the same order, plus
 * a pair around each form XObject naming a layer in its own dictionary, which the text content
 * lacks. Images (whose /OC adds pairs too) are kept out of the list by the document's maxImageSize
 * of 0. When the two do not line up (a damaged stream read differently), every layer on a page
 * that hides any is left out.
 */
function layerVisibility(list: OperatorList, items: ContentItem[], layers: Layers, OPS: Operators): boolean[] {
  const marks = marksWithText(items)
  const aligned = lineUp(list, marks, layers, OPS, false) ?? lineUp(list, marks, layers, OPS, true)
  if (aligned) return aligned
  const anyHidden = list.fnArray.some((op, index) => op === OPS.beginMarkedContentProps && list.argsArray[index]?.[0] === 'OC' && !shows(layers, list.argsArray[index]))
  return marks.filter(mark => isLayerStart(mark.item)).map(() => !anyHidden)
}

/**
 * The visibility of each layer start of the text content, read off the operator list, or
 * undefined when the two do not line up. A pair around a form with its own /OC starts right
 * before the form; so does a BDC written right before the form's Do: the text content tells them
 * apart, a BDC having its start there, after as much text as the list has shown since the last
 * operator the two share. When both could be (the form's text starts with a layer of its own and
 * nothing came before it), `tieIsForm` says which is tried.
 */
function lineUp(list: OperatorList, marks: TextMark[], layers: Layers, OPS: Operators, tieIsForm: boolean): boolean[] | undefined {
  const { fnArray, argsArray } = list
  const visible: boolean[] = []
  const open: Array<'shared' | 'form'> = []
  let at = 0
  let text = 0
  for (let index = 0; index < fnArray.length; index++) {
    const op = fnArray[index]
    if (op === OPS.showText) {
      text += glyphsAmount(argsArray[index][0])
    } else if (op === OPS.beginMarkedContent || op === OPS.beginMarkedContentProps) {
      const layerStart = op === OPS.beginMarkedContentProps && argsArray[index]?.[0] === 'OC'
      const mark = marks[at]
      const beforeForm = fnArray[index + 1] === OPS.paintFormXObjectBegin || fnArray[index + 1] === OPS.beginGroup
      if (layerStart && beforeForm && (tieIsForm || !(mark !== undefined && isLayerStart(mark.item) && mark.textBefore === text))) {
        open.push('form')
        continue
      }
      if (mark === undefined || mark.item.type === 'endMarkedContent' || isLayerStart(mark.item) !== layerStart) return undefined
      if (layerStart) visible.push(shows(layers, argsArray[index]))
      open.push('shared')
      at++
      text = 0
    } else if (op === OPS.endMarkedContent) {
      // An EMC closing nothing: getTextContent drops it as well.
      if (open.pop() !== 'shared') continue
      if (marks[at]?.item.type !== 'endMarkedContent') return undefined
      at++
      text = 0
    }
  }
  return at === marks.length ? visible : undefined
}

/**
 * Which text pieces lie in a form XObject whose layer is switched off. The operator list wraps such
 * a form in a marked sequence naming its layer (`/OC`), right before its beginGroup or
 * paintFormXObjectBegin; the form's text is what the list shows up to the matching
 * paintFormXObjectEnd (its marked-content operators may be unbalanced; these never are). The text
 * content has that text inline, unmarked: it is found by the amount of text before it, counted on
 * both sides as lineUp counts it. Only when the two sides count the same text in all, and each
 * hidden form starts and ends between two pieces, are the pieces placed; otherwise (a damaged
 * stream read differently) none is, and the forms' text is read.
 */
function hiddenForms(list: OperatorList, items: ContentItem[], layers: Layers, OPS: Operators): (item: TextItem) => boolean {
  const { fnArray, argsArray } = list
  const ranges: Array<[number, number]> = []
  let total = 0
  let forms = 0
  /** The form depth of the outermost hidden form open, and where its text starts. */
  let open: { depth: number; start: number } | undefined
  let pending = false
  for (let index = 0; index < fnArray.length; index++) {
    const op = fnArray[index]
    if (op === OPS.showText) {
      total += glyphsAmount(argsArray[index][0])
    } else if (op === OPS.beginMarkedContentProps && argsArray[index]?.[0] === 'OC') {
      const next = fnArray[index + 1] === OPS.beginGroup ? fnArray[index + 2] : fnArray[index + 1]
      pending = open === undefined && next === OPS.paintFormXObjectBegin && !shows(layers, argsArray[index])
    } else if (op === OPS.paintFormXObjectBegin) {
      forms++
      if (pending) open = { depth: forms, start: total }
      pending = false
    } else if (op === OPS.paintFormXObjectEnd) {
      if (open?.depth === forms) {
        if (total > open.start) ranges.push([open.start, total])
        open = undefined
      }
      forms--
    }
  }
  if (ranges.length === 0) return () => false
  // The pieces and the ranges in one walk, both in order (the ranges are apart: only the outermost
  // hidden form counts). A piece of white space alone (no text) at a form's edge is taken as outside it.
  const hidden = new Set<TextItem>()
  const edges = new Set<number>([0])
  let at = 0
  let range = 0
  for (const item of items) {
    if (!isText(item)) continue
    const end = at + textAmount(item.str)
    edges.add(end)
    while (range < ranges.length && ranges[range]![1] <= at) range++
    const [from, to] = ranges[range] ?? [Infinity, Infinity]
    if (at === end ? at > from && at < to : at < to && end > from) hidden.add(item)
    at = end
  }
  if (at !== total || ranges.some(([start, end]) => !edges.has(start) || !edges.has(end))) return () => false
  return item => hidden.has(item)
}

/** A BDC's operands as the operator list gives them: ['OC', the parsed group or membership dictionary]. */
function shows(layers: Layers, operands: [string, unknown]): boolean {
  return layers.isVisible(operands[1]) !== false
}

/**
 * Whether an annotation (getAnnotations' data) shows as the layers are when the PDF opens: its /OC,
 * a group or a membership dictionary, parsed by pdf.js as a BDC's is (`oc`), decides as it does for
 * text. Viewers and pdftotext leave out a form field or typed text in a layer that is switched off.
 */
export function annotationShown(layers: Layers | undefined, annotation: { oc?: unknown }): boolean {
  return layers === undefined || annotation.oc === undefined || shows(layers, ['OC', annotation.oc])
}

/** The marked-content items, each with the amount of text since the one before it. */
function marksWithText(items: ContentItem[]): TextMark[] {
  const marks: TextMark[] = []
  let text = 0
  for (const item of items) {
    if (isText(item)) {
      text += textAmount(item.str)
    } else {
      marks.push({ item, textBefore: text })
      text = 0
    }
  }
  return marks
}

/** How much text a showText operator's glyphs hold, counted as textAmount counts a piece's. */
function glyphsAmount(glyphs: unknown): number {
  return (glyphs as unknown[]).reduce<number>((sum, glyph) => sum + textAmount((glyph as { unicode?: unknown } | null)?.unicode), 0)
}

/**
 * How much text a string holds, counted alike on both sides: its characters but white space
 * (getTextContent adds spaces of its own) once compatibility forms are unfolded (it unfolds a
 * ligature, "ﬁ" to "fi").
 */
function textAmount(text: unknown): number {
  return typeof text === 'string' ? text.normalize('NFKC').replace(/\s/g, '').length : 0
}
