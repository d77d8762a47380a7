import { describe, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { extractDocument } from '../../src/documents/extract'
import type { ExtractionLimits } from '../../src/documents/types'
import { buildZip, fixture } from './hostile'
import { docxParts, para, table } from './ooxml'

// A DOCX's list items labelled as Word shows them (README "Documents"), on documents built in code, through the real extractor.
const defaults = loadConfig({}).documents
const limits: ExtractionLimits = { maxTextBytes: defaults.maxTextBytes, zip: defaults.zip, pdf: defaults.pdf }
const text = async (bytes: Uint8Array) => (await extractDocument(bytes, limits)).text

describe('DOCX list items keep their labels (QA: clause numbers were lost)', () => {
  test('a LibreOffice-made numbered list with a nested level, and a bulleted one', async () => {
    expect(await text(await fixture('list.docx'))).toBe('Terms:\n1. Payment due in 30 days\n  a) Late fee applies\n2. Call support\nAs stated in clause 2 above.\n- apples\n- pears')
  })

  test("numbering.xml's formats, label texts, starts and overrides; deeper levels restart under each item", async () => {
    const W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    const level = (ilvl: number, format: string, text: string, start = 1) => `<w:lvl w:ilvl="${ilvl}"><w:start w:val="${start}"/><w:numFmt w:val="${format}"/><w:lvlText w:val="${text}"/></w:lvl>`
    const numbering =
      `<w:numbering ${W}><w:abstractNum w:abstractNumId="0">${level(0, 'upperRoman', '%1.')}${level(1, 'decimal', '%1.%2')}${level(2, 'bullet', '')}</w:abstractNum>` +
      `<w:abstractNum w:abstractNumId="1">${level(0, 'lowerLetter', '(%1)', 25)}</w:abstractNum>` +
      '<w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num><w:num w:numId="2"><w:abstractNumId w:val="1"/><w:lvlOverride w:ilvl="0"><w:startOverride w:val="26"/></w:lvlOverride></w:num></w:numbering>'
    const item = (numId: number, ilvl: number, words: string) => `<w:p><w:pPr><w:numPr><w:ilvl w:val="${ilvl}"/><w:numId w:val="${numId}"/></w:numPr></w:pPr><w:r><w:t>${words}</w:t></w:r></w:p>`
    const body = item(1, 0, 'Scope') + item(1, 1, 'Parties') + item(1, 2, 'a note') + item(1, 1, 'Term') + item(1, 0, 'Fees') + item(1, 1, 'Amount') + item(2, 0, 'z-th') + item(2, 0, 'after z')
    const parts = docxParts(body).concat([{ name: 'word/numbering.xml', data: new TextEncoder().encode(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>${numbering}`) }])
    expect(await text(buildZip(parts))).toBe('I. Scope\n  I.1 Parties\n    - a note\n  I.2 Term\nII. Fees\n  II.1 Amount\n(z) z-th\n(aa) after z')
  })
})

describe('DOCX list numbering as Word counts it (regression QA)', () => {
  const W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
  const level = (ilvl: number, format: string, text: string, extra = '') => `<w:lvl w:ilvl="${ilvl}"><w:start w:val="1"/><w:numFmt w:val="${format}"/><w:lvlText w:val="${text}"/>${extra}</w:lvl>`
  const item = (numId: number, words: string, ilvl = 0) => `<w:p><w:pPr><w:numPr><w:ilvl w:val="${ilvl}"/><w:numId w:val="${numId}"/></w:numPr></w:pPr><w:r><w:t>${words}</w:t></w:r></w:p>`
  const read = (numbering: string, body: string) => text(buildZip(docxParts(body).concat([{ name: 'word/numbering.xml', data: new TextEncoder().encode(`<w:numbering ${W}>${numbering}</w:numbering>`) }])))

  test('instances of one definition share its counters; one overriding a start restarts it when first used (before: "7." then "1.")', async () => {
    const numbering = `<w:abstractNum w:abstractNumId="5">${level(0, 'decimal', '%1.')}</w:abstractNum>` +
      '<w:num w:numId="5"><w:abstractNumId w:val="5"/></w:num><w:num w:numId="6"><w:abstractNumId w:val="5"/><w:lvlOverride w:ilvl="0"><w:startOverride w:val="7"/></w:lvlOverride></w:num>'
    expect(await read(numbering, item(6, 'Restarted at 7') + item(5, 'eight'))).toBe('7. Restarted at 7\n8. eight')
    expect(await read(numbering, item(5, 'one') + item(5, 'two') + item(6, 'seven again'))).toBe('1. one\n2. two\n7. seven again')
  })

  test("an override's whole level is its instance's, not the definition read last (before: the wrong list changed)", async () => {
    const numbering = `<w:abstractNum w:abstractNumId="0">${level(0, 'decimal', '%1.')}</w:abstractNum><w:abstractNum w:abstractNumId="1">${level(0, 'lowerLetter', '%1)')}</w:abstractNum>` +
      `<w:num w:numId="2"><w:abstractNumId w:val="0"/><w:lvlOverride w:ilvl="0"><w:lvl w:ilvl="0"><w:start w:val="5"/><w:numFmt w:val="upperRoman"/><w:lvlText w:val="%1."/></w:lvl></w:lvlOverride></w:num>` +
      '<w:num w:numId="3"><w:abstractNumId w:val="1"/></w:num>'
    expect(await read(numbering, item(2, 'five') + item(3, 'letter'))).toBe('V. five\na) letter')
  })

  test('numId 0 (numbering removed) and an undefined one have no label; a list style and legal numbering are followed', async () => {
    const numbering = `<w:abstractNum w:abstractNumId="0"><w:styleLink w:val="LegalList"/>${level(0, 'upperRoman', 'Section %1.')}${level(1, 'lowerLetter', 'Section %1.%2', '<w:isLgl/>')}</w:abstractNum>` +
      '<w:abstractNum w:abstractNumId="1"><w:numStyleLink w:val="LegalList"/></w:abstractNum><w:num w:numId="1"><w:abstractNumId w:val="1"/></w:num>'
    expect(await read(numbering, item(0, 'plain') + item(9, 'undefined') + item(1, 'Scope') + item(1, 'Parties', 1))).toBe('plain\nundefined\nSection I. Scope\n  Section 1.1 Parties')
  })

  test("a table cell's items are labelled as Word shows them, counted in reading order with the body's (before: no label in the cell)", async () => {
    const numbering = `<w:abstractNum w:abstractNumId="0">${level(0, 'decimal', '%1.')}${level(1, 'lowerLetter', '%2)')}</w:abstractNum><w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>`
    const body = item(1, 'first') + table([[item(1, 'in cell') + item(1, 'also in cell'), item(1, 'next cell') + item(1, 'sub', 1)]]) + item(1, 'after table')
    expect(await read(numbering, body)).toBe('1. first\n2. in cell 3. also in cell\t4. next cell a) sub\n5. after table')
  })

  test('a paragraph numbered by its style (w:numPr in styles.xml, through w:basedOn) is labelled; its own numId 0 turns it off (before: no numbers)', async () => {
    // LibreOffice numbers headings so (Heading 1 and 2, levels linked by w:pStyle): the PDF shows
    // "1. Introduction", "1.1 Scope", "2. Terms", and "section 1.1" pointed nowhere.
    const styled = (styleId: string, extra = '') => `<w:style w:type="paragraph" w:styleId="${styleId}">${extra}</w:style>`
    const numPr = (numId: number, ilvl?: number) => `<w:pPr><w:numPr>${ilvl === undefined ? '' : `<w:ilvl w:val="${ilvl}"/>`}<w:numId w:val="${numId}"/></w:numPr></w:pPr>`
    const styles = `<w:styles ${W}>${styled('Normal')}${styled('Heading1', `<w:basedOn w:val="Normal"/>${numPr(1, 0)}`)}${styled('Heading2', `<w:basedOn w:val="Normal"/>${numPr(1)}`)}` +
      `${styled('Lettered', numPr(2))}${styled('LetteredMore', '<w:basedOn w:val="Lettered"/>')}${styled('Unnumbered', `<w:basedOn w:val="Lettered"/>${numPr(0)}`)}</w:styles>`
    const numbering = `<w:abstractNum w:abstractNumId="0">${level(0, 'decimal', '%1.', '<w:pStyle w:val="Heading1"/>')}${level(1, 'decimal', '%1.%2', '<w:pStyle w:val="Heading2"/>')}</w:abstractNum>` +
      `<w:abstractNum w:abstractNumId="1"><w:lvl w:ilvl="0"><w:start w:val="3"/><w:numFmt w:val="upperLetter"/><w:lvlText w:val="%1)"/></w:lvl></w:abstractNum>` +
      '<w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num><w:num w:numId="2"><w:abstractNumId w:val="1"/></w:num>'
    const styledPara = (styleId: string, words: string, own = '') => `<w:p><w:pPr><w:pStyle w:val="${styleId}"/>${own}</w:pPr><w:r><w:t>${words}</w:t></w:r></w:p>`
    const body = styledPara('Heading1', 'Introduction') + para('Body.') + styledPara('Heading2', 'Scope') + styledPara('Heading1', 'Terms') +
      styledPara('Lettered', 'first') + styledPara('LetteredMore', 'second') + styledPara('Unnumbered', 'plain') + styledPara('Lettered', 'not numbered here', '<w:numPr><w:numId w:val="0"/></w:numPr>') +
      table([[styledPara('Lettered', 'in a cell')]])
    const parts = docxParts(body).concat([
      { name: 'word/numbering.xml', data: new TextEncoder().encode(`<w:numbering ${W}>${numbering}</w:numbering>`) },
      { name: 'word/styles.xml', data: new TextEncoder().encode(styles) },
    ])
    expect(await text(buildZip(parts))).toBe('1. Introduction\nBody.\n  1.1 Scope\n2. Terms\nC) first\nD) second\nplain\nnot numbered here\nE) in a cell')
  })

  test("the default paragraph style's numbering numbers the paragraphs naming no style, or an unknown one; numId 0 and chunks' paragraphs stay plain (before: no numbers)", async () => {
    // Word numbers every paragraph of the default style when that style has w:numPr; a paragraph's
    // own numId 0 turns it off, and a style of its own that does not number keeps it plain.
    const REL = 'http://schemas.openxmlformats.org/officeDocument/2006/relationships'
    const styles = `<w:styles ${W}><w:style w:type="paragraph" w:default="1" w:styleId="Body"><w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr></w:style>` +
      '<w:style w:type="paragraph" w:styleId="Derived"><w:basedOn w:val="Body"/></w:style><w:style w:type="paragraph" w:styleId="Plain"/></w:styles>'
    const numbering = `<w:abstractNum w:abstractNumId="0">${level(0, 'decimal', '%1.')}</w:abstractNum><w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>`
    const styledPara = (styleId: string, words: string) => `<w:p><w:pPr><w:pStyle w:val="${styleId}"/></w:pPr><w:r><w:t>${words}</w:t></w:r></w:p>`
    const body = para('one') + item(0, 'switched off') + styledPara('Plain', 'plain') + styledPara('Derived', 'derived') + styledPara('Missing', 'unknown style') +
      '<w:altChunk r:id="rIdA"/><w:altChunk r:id="rIdB"/>' + table([[para('in a cell')]]) + para('last')
    const parts = docxParts(body).map(spec =>
      spec.name === 'word/_rels/document.xml.rels' ? { ...spec, data: new TextEncoder().encode(new TextDecoder().decode(spec.data).replace('</Relationships>', `<Relationship Id="rIdA" Type="${REL}/aFChunk" Target="chunk.txt"/><Relationship Id="rIdB" Type="${REL}/aFChunk" Target="chunk.html"/></Relationships>`)) } : spec,
    ).concat([
      { name: 'word/numbering.xml', data: new TextEncoder().encode(`<w:numbering ${W}>${numbering}</w:numbering>`) },
      { name: 'word/styles.xml', data: new TextEncoder().encode(styles) },
      { name: 'word/chunk.txt', data: new TextEncoder().encode('chunk line') },
      { name: 'word/chunk.html', data: new TextEncoder().encode('<html><body><p>html line</p><blockquote>quoted</blockquote></body></html>') },
    ])
    expect(await text(buildZip(parts))).toBe('1. one\nswitched off\nplain\n2. derived\n3. unknown style\nchunk line\nhtml line\nquoted\n4. in a cell\n5. last')
  })

  describe('a default paragraph style that numbers', () => {
    const numbering = `<w:abstractNum w:abstractNumId="0">${level(0, 'decimal', '%1.')}${level(1, 'lowerLetter', '%2)')}</w:abstractNum><w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>` +
      `<w:abstractNum w:abstractNumId="1">${level(0, 'upperRoman', '%1.')}${level(1, 'upperLetter', '%2.')}</w:abstractNum><w:num w:numId="2"><w:abstractNumId w:val="1"/></w:num>`
    const styles = `<w:styles ${W}><w:style w:type="paragraph" w:default="1" w:styleId="Body"><w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr></w:style>` +
      '<w:style w:type="paragraph" w:styleId="Plain"/><w:style w:type="paragraph" w:styleId="Roman"><w:pPr><w:numPr><w:numId w:val="2"/></w:numPr></w:pPr></w:style></w:styles>'
    const build = (body: string, withStyles = styles) => buildZip(docxParts(body).concat([
      { name: 'word/numbering.xml', data: new TextEncoder().encode(`<w:numbering ${W}>${numbering}</w:numbering>`) },
      { name: 'word/styles.xml', data: new TextEncoder().encode(withStyles) },
    ]))
    /** A paragraph whose mark and text are hidden (`properties` more of its w:pPr). */
    const hidden = (properties = '') => `<w:p><w:pPr>${properties}<w:rPr><w:vanish/></w:rPr></w:pPr><w:r><w:rPr><w:vanish/></w:rPr><w:t>hidden</w:t></w:r></w:p>`
    /** A paragraph of `words` with paragraph properties `properties`. */
    const own = (words: string, properties: string) => `<w:p><w:pPr>${properties}</w:pPr><w:r><w:t>${words}</w:t></w:r></w:p>`

    test('a paragraph Word shows nothing of has no label and no line, but its list counts it (before: a stray "4. " line)', async () => {
      // An empty paragraph, and one whose text alone is hidden, show their mark: Word labels them.
      const body = para('a') + '<w:p/>' + '<w:p><w:r><w:rPr><w:vanish/></w:rPr><w:t>hidden words</w:t></w:r></w:p>' + hidden() + para('z')
      expect(await text(build(body))).toBe('1. a\n2. \n3. \n5. z')
      // Numbered by its own w:numPr, and in a table cell.
      const numbered = hidden('<w:pStyle w:val="Plain"/><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr>')
      expect(await text(build(para('a') + numbered + para('z') + table([[para('b') + hidden() + para('c')]])))).toBe('1. a\n3. z\n4. b 6. c')
      // Not numbered: no empty line either.
      expect(await text(build(para('a') + hidden() + para('z'), `<w:styles ${W}/>`))).toBe('a\nz')
    })

    test("a document's own bookmark or numId named like the rewrite's old fixed markers is the document's (QA: a visible clause vanished)", async () => {
      // A bookmark in a visible paragraph, one standing before a paragraph (officeparser gives it to that
      // paragraph), one in a table cell, and one written with a character reference: each paragraph shows.
      const bookmark = (name: string) => `<w:bookmarkStart w:id="7" w:name="${name}"/>`
      const marked = (words: string, name = '-svc-hidden-paragraph') => `<w:p>${bookmark(name)}<w:r><w:t>${words}</w:t></w:r><w:bookmarkEnd w:id="7"/></w:p>`
      const body = para('a') + marked('CLAUSE ONE') + bookmark('-svc-hidden-paragraph') + para('CLAUSE TWO') + table([[marked('CLAUSE THREE')]]) + marked('CLAUSE FOUR', '&#45;svc-hidden-paragraph')
      expect(await text(build(body))).toBe('1. a\n2. CLAUSE ONE\n3. CLAUSE TWO\n4. CLAUSE THREE\n5. CLAUSE FOUR')
      // A numId the document names but does not define gives no label, as Word shows it, whatever the name.
      expect(await text(build(para('a') + own('own numId', '<w:numPr><w:ilvl w:val="1"/><w:numId w:val="-svc-style-numbering"/></w:numPr>')))).toBe('1. a\n  own numId')
      // The rewrite's own marks still work beside them: a hidden paragraph counted, a level alone numbered by its style.
      expect(await text(build(marked('b') + hidden() + own('sub', '<w:numPr><w:ilvl w:val="1"/></w:numPr>')))).toBe('1. b\n  a) sub')
      // In a note too: no empty line between the note's others.
      const footnote = `<w:footnote w:id="1"><w:p><w:r><w:footnoteRef/></w:r><w:r><w:t>note</w:t></w:r></w:p>${hidden()}${para('more')}</w:footnote>`
      expect(await text(buildZip(docxParts(`<w:p><w:r><w:t>see</w:t></w:r><w:r><w:footnoteReference w:id="1"/></w:r></w:p>`, { footnotes: footnote })))).toBe('see[^1]\n\n[Footnotes]\n[^1] note\nmore')
    })

    test("a paragraph's own w:numPr setting a level alone numbers it at that level of its style's list (before: unnumbered)", async () => {
      const levelOne = '<w:numPr><w:ilvl w:val="1"/></w:numPr>'
      const body = para('a') + own('sub', levelOne) + para('b') + own('I', '<w:pStyle w:val="Roman"/>') + own('A', `<w:pStyle w:val="Roman"/>${levelOne}`) +
        // An empty w:numPr sets nothing: the style numbers; a style that does not number leaves a level alone unnumbered; numId 0 stays off.
        own('II', '<w:pStyle w:val="Roman"/><w:numPr/>') + own('plain', `<w:pStyle w:val="Plain"/>${levelOne}`) + own('off', '<w:numPr><w:ilvl w:val="1"/><w:numId w:val="0"/></w:numPr>')
      expect(await text(build(body))).toBe('1. a\n  a) sub\n2. b\nI. I\n  A. A\nII. II\nplain\n  off')
    })
  })
})
