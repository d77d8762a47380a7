import { AlternateContent, scanWord, startTagEnd, wordWriter, type NamespaceOf } from './docx-names'
import { hiddenByStyles, on, take, type Budget, type HiddenStyles } from './docx-styles'
import { rewriteMarkers, type RewriteMarkers } from './list-labels'
import { hiddenVml, OpenDrawings } from './docx-drawings'
import { OpenRubies } from './docx-ruby'
import { symbolText } from './docx-symbols'
import { tableHidden } from './docx-table-styles'
import { OpenTables } from './docx-tables'
import { applyEdits, BASE_TEXT, declares, escapeText, imageShown, KEPT_IN_HIDDEN_RUN, lineGoesOn, RANGE_MARKS, REMOVED, TABLE_LOOK, TEXT, textShown, type Edit, type Joining, type Open, type Paragraph, type Run } from './docx-rewrite-state'

// What officeparser 8.1.1's run loop (WordParser.js, processChildNode) loses or garbles in a Word
// document, rewritten before it reads the package into forms it reads right: a non-breaking hyphen
// and a symbol (w:sym) as text, a page or column break between words as a line break, an absolute
// position tab (w:ptab) as a tab, a ruby as its base text (docx-ruby.ts), a legacy form checkbox as
// ☒ or ☐, a picture as its alternative text (docx-drawings.ts), "[Image: …]" on a line of its own; and left
// out, what Word does not show: hidden text (w:vanish, set on the run or by its styles), a hidden
// drawing or VML shape with all it holds (docx-drawings.ts) and a content control's placeholder
// ("Click or tap here to enter text."). Hidden text is a prompt-injection vector, as hidden HTML is
// (web pages' hidden elements are left out too). Tracked changes as Word's final view shows them:
// what was deleted or moved away left out (w:del, w:moveFrom: officeparser skips it, but what is
// read beside it, a chart, must not find it), a table row or cell marked so
// too (docx-tables.ts: a vertical merge whose first cell goes starts again at the next one shown),
// and a paragraph whose mark is (`w:pPr/w:rPr/w:del`) joined with the next one, or left out when
// nothing of it shows. And what officeparser would read otherwise than Word: an
// element it takes for WordprocessingML by its name (`w:t`, `t`) in another namespace or none is
// left out (Word ignores it), and mc:AlternateContent is left with the one branch Word shows
// (docx-names.ts AlternateContent), as a Fallback officeparser takes; and the grid columns a table
// row skips before its first cell (w:gridBefore), which officeparser does not count, as an empty
// cell spanning them.
//
// Only the elements concerned are touched: each is replaced where it stands in the part's text, the
// rest copied as it is. No replacement holds more elements than what it replaces, so the document
// stays within MAX_XML_ELEMENTS (the empty cell for skipped columns, and the bookmark marking a
// paragraph Word shows nothing of for list-labels.ts, are the additions, each taken from the element
// budget as it is written); nor, save for text the decoding itself changed (invalid UTF-8 read as
// U+FFFD, as officeparser reads it), a ruby's base text or a picture's alternative text escaped, a
// merge's continuation made its start, those additions, or an odd mix of prefixes, more bytes:
// docx-package.ts checks the inflated size again.
// Names are read by namespace, whatever the prefix (docx-names.ts scanWord). What is written in an
// element's place is written w:, as officeparser reads it, and declares w: where it is not bound to
// WordprocessingML: the replaced element's own declarations go with it.

/**
 * `xml` (a document, header, footer or notes part) with the elements officeparser mishandles
 * rewritten, as the pieces of its text in order; undefined when there is nothing to rewrite, or
 * the part is not well-formed (then nothing can be said of what it shows).
 */
export function rewritePart(xml: string, styles: HiddenStyles, budget: Budget = { left: Number.POSITIVE_INFINITY }, markers: RewriteMarkers = rewriteMarkers()): { pieces: string[] } | 'malformed' | undefined {
  // A table style's conditional formats apply by where a cell stands, its table's last row and its
  // row's last cell among it, known only at their ends: a first reading finds the tables' shapes
  // (docx-tables.ts), its elements counted against a copy of the budget.
  if (![...styles.table.values(), styles.defaultTable].some(setting => (setting?.conditions.size ?? 0) > 0)) return rewriteReading(xml, styles, budget, markers, new OpenTables())
  const first = new OpenTables()
  if (rewriteReading(xml, styles, { left: budget.left }, markers, first) === 'malformed') return 'malformed'
  return rewriteReading(xml, styles, budget, markers, new OpenTables(first.shapes))
}

function rewriteReading(xml: string, styles: HiddenStyles, budget: Budget, markers: RewriteMarkers, tables: OpenTables): { pieces: string[] } | 'malformed' | undefined {
  const edits: Edit[] = []
  // Edits are made in order of their start: an element's own as it ends, replacing those made inside
  // it; a start tag's rename as it opens.
  const edit = (start: number, end: number, text: string) => {
    while (edits.length > 0 && edits.at(-1)!.start >= start) edits.pop()
    const made = { start, end, text }
    edits.push(made)
    return made
  }
  const open: Open[] = []
  const paragraphs: Paragraph[] = []
  const runs: Run[] = []
  /** The dropped elements open: nothing in them shows. */
  let dropping = 0
  let joining: Joining | undefined
  /** The paragraph waiting joins none: it ends where it did, its properties kept. */
  const joinNone = () => {
    if (joining === undefined) return
    joining.end.dead = true
    if (joining.properties) joining.properties.dead = true
    for (const last of joining.breaks) last.dead = true
    joining = undefined
  }
  const placeholders: boolean[] = []
  let showingPlaceholder = 0
  const rubies = new OpenRubies()
  const alternates = new AlternateContent()
  const drawings = new OpenDrawings()
  let checkBox: { checked?: boolean; byDefault?: boolean } | undefined
  /** A checkbox's form data, ended in its field's w:fldChar, which is open at depth `depth`. */
  let formData: { start: number; depth: number; checked: boolean } | undefined
  // The run's own w:vanish is absolute; without one, its styles decide (hiddenByStyles: w:vanish is a toggle there).
  const runHidden = (run: Run) => showingPlaceholder > 0 || (run.vanish ?? hiddenByStyles(styles, run.style, run.paragraph?.style, run.paragraph?.table))
  let namespaceOf: NamespaceOf = () => undefined
  const rename = (entry: Open, start: number, to: string) => {
    entry.renamed = to
    edit(start, start + 1 + entry.qname.length, `<${to}`)
  }

  const wellFormed = scanWord(
    xml,
    (name, attributes, depth, start, qname, namespaces) => {
      take(budget)
      namespaceOf = namespaces
      const [great, grand, parent] = [open.at(-3)?.name, open.at(-2)?.name, open.at(-1)?.name]
      const entry: Open = { name, qname, attributes }
      open.push(entry)
      let joined: Joining | undefined
      if (joining?.depth === depth) {
        if (name === 'w:p' && qname === joining.qname && joining.plain && !declares(attributes)) {
          // Its start tag goes, the joining paragraph's content now its own; a self-closing one stands for the end tag removed.
          const tagEnd = startTagEnd(xml, start)
          edit(start, tagEnd, xml[tagEnd - 2] === '/' ? `</${qname}>` : '')
          ;[joined, joining] = [joining, undefined]
        } else if (!RANGE_MARKS.has(name)) joinNone()
      }
      const paragraph = paragraphs.at(-1)
      const run = runs.at(-1)
      const shown = dropping === 0 && !(run ? runHidden(run) : showingPlaceholder > 0)
      // Only text that shows puts a page break between words (the run's properties come first in it).
      if (TEXT.has(name) || (name === 'w:br' && !['page', 'column'].includes(attributes['w:type'] ?? ''))) {
        if (paragraph && shown) textShown(paragraph, name)
      }
      if (paragraph && shown && ((parent === 'w:r' && !KEPT_IN_HIDDEN_RUN.has(name)) || name === 'm:oMath')) paragraph.shows = true
      // A drawing or VML shape Word does not show goes whole, as deleted content does (docx-drawings.ts).
      let hidden: Open | undefined
      if (name === 'w:drawing') drawings.start(depth)
      else if (drawings.inside) {
        const drawingDepth = drawings.element(qname, attributes, depth, namespaces)
        if (drawingDepth !== undefined) hidden = open[drawingDepth]
      }
      if (hiddenVml(qname, attributes, namespaces)) hidden = entry
      if (hidden && !hidden.dropped) {
        hidden.dropped = true
        dropping++
      }
      if (name === 'w:p') paragraphs.push({ table: tableHidden(styles, tables.style, tables.look, tables.place()), textSeen: joined?.textSeen ?? false, breaks: joined?.breaks ?? [], image: joined?.image, plain: !declares(attributes), joined })
      else if (REMOVED.has(name) && parent === 'w:rPr' && grand === 'w:pPr' && great === 'w:p' && paragraph) paragraph.markDeleted = true
      else if (REMOVED.has(name) && parent === 'w:trPr' && grand === 'w:tr') tables.deleteRow()
      else if (name === 'w:gridBefore' && parent === 'w:trPr' && grand === 'w:tr') tables.gridBefore(attributes['w:val'])
      else if (name === 'w:cellDel' && parent === 'w:tcPr' && grand === 'w:tc') tables.deleteCell()
      else if (name === 'w:gridSpan' && parent === 'w:tcPr' && grand === 'w:tc') tables.gridSpan(attributes['w:val'])
      else if (REMOVED.has(name) && !parent?.endsWith('Pr')) {
        // Content (not a property saying a mark or row is deleted): it goes.
        entry.dropped = true
        dropping++
      } else if (name === 'w:tr') tables.openRow()
      else if (name === 'w:tc') tables.openCell()
      else if (name === 'w:pStyle' && parent === 'w:pPr' && grand === 'w:p' && paragraph) paragraph.style = attributes['w:val']
      else if (name === 'w:numPr' && parent === 'w:pPr' && grand === 'w:p' && paragraph) paragraph.numbering = { numId: false, level: false }
      else if ((name === 'w:numId' || name === 'w:ilvl') && parent === 'w:numPr' && grand === 'w:pPr' && paragraph?.numbering) paragraph.numbering[name === 'w:numId' ? 'numId' : 'level'] = true
      else if (name === 'w:tbl') tables.openTable()
      else if (name === 'w:tblStyle' && parent === 'w:tblPr' && grand === 'w:tbl') tables.setStyle(attributes['w:val'])
      else if (TABLE_LOOK.has(name) && parent === 'w:tblPr' && grand === 'w:tbl') tables.setLook(name, attributes)
      else if (name === 'w:tblHeader' && parent === 'w:trPr' && grand === 'w:tr') tables.headerRow(on(attributes['w:val']))
      else if (name === 'w:r') runs.push({ editsBefore: edits.length, paragraph, children: [], text: rubies.inBase ? '' : undefined })
      else if (name === 'w:rStyle' && parent === 'w:rPr' && grand === 'w:r' && runs.length > 0) runs.at(-1)!.style = attributes['w:val']
      else if (name === 'w:vanish' && parent === 'w:rPr' && grand === 'w:r' && runs.length > 0) runs.at(-1)!.vanish = on(attributes['w:val'])
      else if (name === 'w:vanish' && parent === 'w:rPr' && grand === 'w:pPr' && great === 'w:p' && paragraph) paragraph.markVanish = on(attributes['w:val'])
      else if (name === 'w:rStyle' && parent === 'w:rPr' && grand === 'w:pPr' && great === 'w:p' && paragraph) paragraph.markStyle = attributes['w:val']
      else if (name === 'w:sdt') placeholders.push(false)
      else if (name === 'w:showingPlcHdr' && parent === 'w:sdtPr' && grand === 'w:sdt' && on(attributes['w:val']) && placeholders.at(-1) === false) {
        placeholders[placeholders.length - 1] = true
        showingPlaceholder++
      } else if (name === 'w:ruby') rubies.start(edits.length, paragraph !== undefined && lineGoesOn(paragraph))
      else if (name === 'w:rubyBase' && parent === 'w:ruby') rubies.base(true)
      else if (name === 'w:checkBox' && parent === 'w:ffData') checkBox = {}
      else if (name === 'w:checked' && parent === 'w:checkBox' && checkBox) checkBox.checked = on(attributes['w:val'])
      else if (name === 'w:default' && parent === 'w:checkBox' && checkBox) checkBox.byDefault = on(attributes['w:val'])
      else if (name === 'mc:AlternateContent') {
        alternates.open()
        if (qname !== 'mc:AlternateContent' && qname !== 'AlternateContent') rename(entry, start, 'AlternateContent')
      } else if ((name === 'mc:Choice' || name === 'mc:Fallback') && parent === 'mc:AlternateContent') {
        // The branch Word shows is written as a Fallback, which officeparser takes whatever it requires; the others go.
        if (alternates.shows(name, attributes.Requires, namespaceOf)) {
          if (qname !== 'mc:Fallback' && qname !== 'Fallback') rename(entry, start, 'Fallback')
        } else {
          entry.dropped = true
          dropping++
        }
      }
    },
    {
      onText(text) {
        const run = runs.at(-1)
        if (run?.text !== undefined && open.at(-1)?.name === 'w:t' && open.at(-2)?.name === 'w:r') run.text += text
      },
      // At an element's end, scanWord's scope is its parent's: where what replaces it stands.
      onClose(name, start, end) {
        const entry = open.pop()!
        const { attributes, qname } = entry
        if (joining && open.length < joining.depth) joinNone()
        if (entry.dropped) dropping--
        const written = wordWriter(namespaceOf)
        const parent = open.at(-1)?.name
        const imageText = name === 'w:drawing' ? drawings.end() : undefined
        const run = parent === 'w:r' ? runs.at(-1) : undefined
        if (run) {
          run.children.push({ name, start, end })
          if (run.text !== undefined) run.text += name === 'w:sym' ? symbolText(attributes['w:font'], attributes['w:char']) : (BASE_TEXT[name] ?? '')
        }
        if (name.startsWith('{') || !name.includes(':') || entry.dropped) {
          // Not Word's (a w: prefix bound elsewhere, an unprefixed name in another namespace or none), or
          // a branch Word does not show: it goes; a root goes empty, for the part to stay a document.
          edit(start, end, open.length === 0 ? '<empty/>' : '')
        } else if (entry.renamed !== undefined) {
          if (name === 'mc:AlternateContent') alternates.close()
          // Its start tag was renamed as it opened; its end tag, unless it closed itself.
          if (xml[end - 2] !== '/') edit(xml.lastIndexOf('<', end - 1), end, `</${entry.renamed}>`)
        } else if (name === 'mc:AlternateContent') alternates.close()
        else if (name === 'w:noBreakHyphen') edit(start, end, written('t', '-'))
        else if (name === 'w:sym') {
          const text = symbolText(attributes['w:font'], attributes['w:char'])
          edit(start, end, text === '' ? '' : written('t', escapeText(text)))
        } else if (name === 'w:ptab') edit(start, end, written('tab'))
        else if (name === 'w:br' && ['page', 'column'].includes(attributes['w:type'] ?? '')) {
          // Between the paragraph's words only: one before them or after them separates nothing.
          const paragraph = paragraphs.at(-1)
          if (paragraph?.textSeen) {
            paragraph.breaks.push(edit(start, end, written('br')))
            paragraph.image = undefined
          }
        } else if (imageText !== undefined) {
          // The picture's alternative text in its place, on a line of its own in its paragraph (in a
          // ruby's base, in the text the ruby is written as).
          const paragraph = paragraphs.at(-1)
          const run = runs.at(-1)
          if (paragraph && dropping === 0 && !(run ? runHidden(run) : showingPlaceholder > 0)) {
            if (run?.text !== undefined && rubies.inBase) {
              rubies.text(run.text)
              run.text = ''
              rubies.image(imageText)
            } else {
              const before = lineGoesOn(paragraph) ? written('br') : ''
              imageShown(paragraph, edit(start, end, before + written('t', escapeText(`[Image: ${imageText}]`), ' xml:space="preserve"')), written('br'))
            }
          }
        } else if (name === 'w:numPr' && parent === 'w:pPr' && open.at(-2)?.name === 'w:p' && paragraphs.at(-1)?.numbering?.numId === false) {
          // Word takes each of a paragraph's numbering settings its w:numPr leaves out from its style:
          // a level alone is that level of the style's list (officeparser reads numId 0, no list), so
          // it is marked for list-labels.ts; with neither, the style's numbering is the paragraph's.
          if (paragraphs.at(-1)!.numbering!.level) {
            take(budget)
            edit(xml.lastIndexOf('<', end - 1), end, `${written('numId', undefined, ` w:val="${markers.styleNumbering}"`)}</${qname}>`)
          } else edit(start, end, '')
        } else if (name === 'w:pPr' && parent === 'w:p' && paragraphs.at(-1)?.markDeleted) {
          // The joined paragraph takes the next one's properties, as Word's does (that mark is the one
          // left). Undoable only when nothing in them was rewritten: the edits made go with it.
          const undoable = (edits.at(-1)?.start ?? -1) < start
          const removed = edit(start, end, '')
          if (undoable) paragraphs.at(-1)!.properties = removed
        } else if (name === 'w:p') {
          const paragraph = paragraphs.pop()!
          if (paragraph.markDeleted && !paragraph.shows) {
            // Nothing of it shows: it goes, and a paragraph joined to it joins the next one instead.
            edit(start, end, '')
            joining = paragraph.joined
          } else if (paragraph.markDeleted) {
            // Its breaks after its text wait for the next paragraph's text, as in one paragraph.
            const { textSeen, breaks, image, plain, properties } = paragraph
            joining = { depth: open.length, qname, plain, end: edit(xml.lastIndexOf('<', end - 1), end, ''), properties, textSeen, breaks, image }
          } else {
            for (const last of paragraph.breaks) last.dead = true
            if (!paragraph.shows && paragraph.joined === undefined && (paragraph.markVanish ?? hiddenByStyles(styles, paragraph.markStyle, paragraph.style, paragraph.table))) {
              // Nothing of it shows, its mark neither: Word shows no line, nor its list label, yet
              // counts it in its list. Marked so for list-labels.ts (officeparser reads a bookmark's name).
              take(budget)
              const selfClosing = xml[end - 2] === '/'
              const marker = written('bookmarkStart', undefined, ` w:name="${markers.hiddenParagraph}"`)
              edit(selfClosing ? end - 2 : xml.lastIndexOf('<', end - 1), end, `${selfClosing ? '>' : ''}${marker}</${qname}>`)
            }
          }
        } else if (name === 'w:vMerge' && parent === 'w:tcPr' && open.at(-2)?.name === 'w:tc') {
          if (tables.vMerge(attributes['w:val'])) edit(start, end, written('vMerge', undefined, ' w:val="restart"'))
        } else if (name === 'w:tc') {
          if (tables.closeCell()) edit(start, end, '')
        } else if (name === 'w:trPr' && parent === 'w:tr' && tables.columnsBefore() > 0) {
          // After the properties' closing '>', ahead of the first cell, whose own edits may replace what starts there.
          const columns = tables.columnsBefore()
          for (let added = columns > 1 ? 3 : 1; added > 0; added--) take(budget)
          edit(end - 1, end, `>${columns > 1 ? written('tc', `<w:tcPr><w:gridSpan w:val="${columns}"/></w:tcPr>`) : written('tc')}`)
        } else if (name === 'w:tr') {
          if (tables.closeRow()) edit(start, end, '')
        } else if (name === 'w:tbl') tables.closeTable()
        else if (name === 'w:r') {
          const run = runs.pop()!
          if (runHidden(run)) {
            edits.length = Math.min(edits.length, run.editsBefore)
            for (const child of run.children) if (!KEPT_IN_HIDDEN_RUN.has(child.name)) edit(child.start, child.end, '')
          } else if (run.text !== undefined && rubies.inBase && dropping === 0) rubies.text(run.text)
        } else if (name === 'w:sdt') {
          if (placeholders.pop()) showingPlaceholder--
        } else if (name === 'w:rubyBase') rubies.base(false)
        else if (name === 'w:ruby') {
          // What its base's runs show, as one text in the run holding it: the annotation (w:rt, a
          // reading) is not the text. Written anew, not moved: what it held may rely on declarations
          // of the ruby's own.
          const ruby = rubies.end()!
          edits.length = Math.min(edits.length, ruby.editsBefore)
          const made = edit(start, end, ruby.text === '' ? '' : written('t', escapeText(ruby.text), ' xml:space="preserve"'))
          const paragraph = paragraphs.at(-1)
          if (ruby.imageLast && paragraph) imageShown(paragraph, made, written('br'))
        } else if (name === 'w:ffData') {
          if (checkBox && parent === 'w:fldChar') formData = { start, depth: open.length - 1, checked: checkBox.checked ?? checkBox.byDefault ?? false }
          checkBox = undefined
        } else if (name === 'w:fldChar' && formData?.depth === open.length) {
          // The form data goes, and the box, as it shows, follows the field's start in its run: text
          // like any other (on a line after a picture's alternative text; what a paragraph shows).
          edit(formData.start, end, `</${qname}>${written('t', formData.checked ? '☒' : '☐')}`)
          formData = undefined
          const [paragraph, run] = [paragraphs.at(-1), runs.at(-1)]
          if (paragraph && parent === 'w:r' && run && dropping === 0 && !runHidden(run)) {
            textShown(paragraph, 'w:t')
            paragraph.shows = true
          }
        }
      },
    },
  )
  if (!wellFormed) return 'malformed'
  return applyEdits(xml, edits)
}
