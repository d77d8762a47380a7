import { describe, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { extractDocument } from '../../src/documents/extract'
import { PackageParts } from '../../src/documents/package-parts'
import { slideFacts } from '../../src/documents/slide-parts'
import { sniff } from '../../src/documents/sniff'
import { readCentralDirectory } from '../../src/documents/zip-guard'
import { ExtractionError, type ExtractionLimits } from '../../src/documents/types'
import { buildZip } from './hostile'
import { docx, docxParts, note, noteReference, pageReferences, para, picture, placeholder, pptx, slideNumber, table, textBox } from './ooxml'

// The DOCX and PPTX text layout (README "Documents"), on documents built in code, through the real extractor.
const defaults = loadConfig({}).documents
const limits: ExtractionLimits = { maxTextBytes: defaults.maxTextBytes, zip: defaults.zip, pdf: defaults.pdf }
const text = async (bytes: Uint8Array) => (await extractDocument(bytes, limits)).text

/** `inner` inside `depth` tables, each of one row of one cell. */
const nested = (depth: number, inner: string) => '<w:tbl><w:tr><w:tc>'.repeat(depth) + inner + '</w:tc></w:tr></w:tbl>'.repeat(depth)

describe('DOCX table cells', () => {
  test("a cell's paragraphs are joined by a space, and a table nested in a cell keeps its text, on the cell's line", async () => {
    // Before: officeparser's cell text, "multipara cell", and nothing for the cell holding a table.
    const body = table([[para('multi') + para('para cell'), table([[para('nested'), para('a\tb')], [para('c')]])], [para('x'), '<w:p/>']])
    expect(await text(docx(para('before') + body + para('after')))).toBe('before\nmulti para cell\tnested a b c\nx\nafter')
  })

  test('merged cells keep every later cell under its own column (QA: LibreOffice-made tables)', async () => {
    // Before: "Merged AB\tC2" (C2 under H2) and "B5\tC5" (B5 under H1): officeparser gives a
    // horizontal merge one cell and leaves out the cells a vertical merge continues.
    const span = (xml: string) => `<w:tcPr><w:gridSpan w:val="2"/></w:tcPr>${xml}`
    const start = (xml: string) => `<w:tcPr><w:vMerge w:val="restart"/></w:tcPr>${xml}`
    const continued = '<w:tcPr><w:vMerge/></w:tcPr><w:p/>'
    const body = table([
      [para('H1'), para('H2'), para('H3')],
      [span(para('Merged AB')), para('C2')],
      [start(para('Tall')), para('B4'), para('C4')],
      [continued, para('B5'), para('C5')],
    ])
    expect(await text(docx(body))).toBe('H1\tH2\tH3\nMerged AB\t\tC2\nTall\tB4\tC4\n\tB5\tC5')
  })

  test("a row starting past the grid's first column (w:gridBefore) keeps each cell under its own column (before: shifted left)", async () => {
    const row = (before: number, cells: string[], after = 0) =>
      `<w:tr><w:trPr>${before ? `<w:gridBefore w:val="${before}"/>` : ''}${after ? `<w:gridAfter w:val="${after}"/>` : ''}</w:trPr>${cells.map(cell => `<w:tc>${cell}</w:tc>`).join('')}</w:tr>`
    const tall = `<w:tcPr><w:vMerge w:val="restart"/></w:tcPr>${para('Tall b1')}`
    const continued = '<w:tcPr><w:vMerge/></w:tcPr><w:p/>'
    const body = `<w:tbl><w:tblGrid><w:gridCol/><w:gridCol/><w:gridCol/></w:tblGrid>${row(0, [para('a1'), tall, para('c1')])}${row(1, [continued, para('c2')])}` +
      `${row(1, [para('b3'), para('c3')])}${row(2, [para('c4')])}${row(1, [para('b5')], 1)}${row(0, [para('a6'), para('b6'), para('c6')])}</w:tbl>`
    expect(await text(docx(body))).toBe('a1\tTall b1\tc1\n\t\tc2\n\tb3\tc3\n\t\tc4\n\tb5\na6\tb6\tc6')
  })

  test('a table nested 1,000 deep keeps its text; 20,000 deep is refused as such, not as a damaged file', async () => {
    // Before: "before\n\nafter" (the text was dropped), and "damaged or not a valid DOCX document".
    expect(await text(docx(para('before') + nested(1000, para('deep')) + para('after')))).toBe('before\ndeep\nafter')
    const error = await extractDocument(docx(nested(20_000, para('deep'))), limits).then(() => undefined, error => error)
    expect(error).toBeInstanceOf(ExtractionError)
    expect((error as ExtractionError).message).toBe('the DOCX document nests its elements (tables within tables, say) too deeply to read')
  })
})

describe('PPTX slides', () => {
  test('each slide is labelled with its own number; a slide without text is left out, its number with it', async () => {
    // Before: a picture-only second slide made the third "[Slide 2]".
    const deck = pptx([{ shapes: textBox('one') }, { shapes: picture }, { shapes: textBox('three') }, { shapes: textBox(' ') }, { shapes: textBox('five') }])
    expect(await text(deck)).toBe('[Slide 1]\none\n\n[Slide 3]\nthree\n\n[Slide 5]\nfive')
  })
})

describe('speaker notes, headers and footers', () => {
  test("a slide's notes follow its text under [Notes]; the notes page's slide-number placeholder is left out", async () => {
    // Before: notes never reached the text. Notes pages are numbered as made (the third slide's is notesSlide1).
    const deck = pptx([
      { shapes: textBox('one'), notes: textBox('Say hello', 'then go on') + slideNumber(1) },
      { shapes: picture, notes: textBox('Only notes here') },
      { shapes: textBox('three') },
      { shapes: textBox('four'), notes: slideNumber(4) },
      { shapes: picture, notes: slideNumber(5) },
    ])
    expect(await text(deck)).toBe('[Slide 1]\none\n[Notes]\nSay hello\nthen go on\n\n[Slide 2]\n[Notes]\nOnly notes here\n\n[Slide 3]\nthree\n\n[Slide 4]\nfour')
  })

  test('DOCX headers come before the body under [Header], footers after it under [Footer], each distinct line once', async () => {
    // Before: headers and footers never reached the text. Word keeps a part per kind of page (default, first, even), shown here.
    const document = docx(para('Body text') + table([[para('a'), para('b')]]), {
      headers: [para('ACME Corp') + para('Confidential'), para('ACME Corp'), '<w:p/>'],
      footers: [table([[para('Page'), para('1')]]), table([[para('Page'), para('1')]])],
      sectPr: pageReferences(3, 2) + '<w:titlePg/>',
      settings: '<w:evenAndOddHeaders/>',
    })
    expect(await text(document)).toBe('[Header]\nACME Corp\nConfidential\n\nBody text\na\tb\n\n[Footer]\nPage\t1')
    // Without headers and footers the text is the body alone, as before.
    expect(await text(docx(para('Body text')))).toBe('Body text')
  })

  test('DOCX footnotes and endnotes: labelled where referenced, in reading order, listed after the body; comments left out', async () => {
    // Before: their text never reached the output, nor did any mark of where they were referenced.
    const run = (text: string) => `<w:r><w:t xml:space="preserve">${text}</w:t></w:r>`
    const commented = '<w:p><w:commentRangeStart w:id="0"/>' + run('Reviewed') + '<w:commentRangeEnd w:id="0"/><w:r><w:commentReference w:id="0"/></w:r></w:p>'
    const body = `<w:p>${run('First')}${noteReference('footnote', 7)}${run(' claim.')}</w:p>` +
      `<w:p>${run('Second')}${noteReference('endnote', 1)}</w:p>` +
      table([[`<w:p>${run('cell')}${noteReference('footnote', 2)}</w:p>`, para('plain')]]) + commented
    const document = docx(body, {
      footers: [para('Page 1')],
      footnotes: note('footnote', 2, 'In a cell.') + note('footnote', 7, 'Smith 2020, p. 4.', 'Second paragraph.'),
      endnotes: note('endnote', 1, 'An endnote.'),
      comments: '<w:comment w:id="0" w:author="Ann" w:initials="A"><w:p><w:r><w:t>Reviewer remark</w:t></w:r></w:p></w:comment>',
    })
    expect(await text(document)).toBe([
      'First[^1] claim.', 'Second[^2]', 'cell[^3]\tplain', 'Reviewed', '',
      '[Footnotes]', '[^1] Smith 2020, p. 4.', 'Second paragraph.', '[^3] In a cell.',
      '[Endnotes]', '[^2] An endnote.', '',
      '[Footer]', 'Page 1',
    ].join('\n'))
    // A note referenced before any run of its paragraph or cell (QA: lost, label and text), and
    // a paragraph holding only a note.
    const leading = `<w:p>${noteReference('footnote', 1)}${run('After a leading note.')}</w:p><w:p>${noteReference('endnote', 1)}</w:p>` +
      table([[`<w:p>${noteReference('footnote', 2)}${run('Cell B')}</w:p>`]])
    expect(await text(docx(leading, { footnotes: note('footnote', 1, 'Lead.') + note('footnote', 2, 'Cell.'), endnotes: note('endnote', 1, 'End.') }))).toBe(
      ['[^1]After a leading note.', '[^2]', '[^3]Cell B', '', '[Footnotes]', '[^1] Lead.', '[^3] Cell.', '[Endnotes]', '[^2] End.'].join('\n'),
    )
    // Comments alone add nothing; a document without notes has no notes section.
    expect(await text(docx(commented, { comments: '<w:comment w:id="0" w:author="Ann"><w:p><w:r><w:t>x</w:t></w:r></w:p></w:comment>' }))).toBe('Reviewed')
  })

  test('headers, footers and notes count against the text cap', async () => {
    const capped = { ...limits, maxTextBytes: 64 }
    const refuse = (bytes: Uint8Array) => extractDocument(bytes, capped).then(() => 'read', (error: Error) => error.message)
    expect(await refuse(docx(para('short'), { headers: [para('h'.repeat(70))] }))).toMatch(/longer than the 64-byte limit/)
    expect(await refuse(docx(para('short'), { footers: [para('f'.repeat(70))] }))).toMatch(/longer than the 64-byte limit/)
    expect(await refuse(docx(`<w:p><w:r><w:t>short</w:t></w:r>${noteReference('footnote', 1)}</w:p>`, { footnotes: note('footnote', 1, 'n'.repeat(70)) }))).toMatch(/longer than the 64-byte limit/)
    expect(await refuse(pptx([{ shapes: textBox('short'), notes: textBox('n'.repeat(70)) }]))).toMatch(/longer than the 64-byte limit/)
  })
})

describe('a DOCX whose main part is not word/document.xml', () => {
  const online = { main: 'word/document2.xml' }
  const refusal = (bytes: Uint8Array) => extractDocument(bytes, limits).then(() => 'read', (error: Error) => error.message)

  test("word/document2.xml (Word Online's name) is found through the package's relationships and read", async () => {
    // Before: "not a Word, PowerPoint or Excel document".
    expect(await extractDocument(docx(para('Online'), { ...online, headers: [para('H')] }), limits)).toEqual({ documentType: 'docx', text: '[Header]\nH\n\nOnline' })
    // The target as Word Online writes it, from the package root.
    const parts = docxParts(para('Rooted'), online)
    const relationships = parts.find(entry => entry.name === '_rels/.rels')!
    relationships.data = new TextEncoder().encode(new TextDecoder().decode(relationships.data).replace('Target="word/', 'Target="/word/'))
    expect(await text(buildZip(parts))).toBe('Rooted')
  })

  test('the zip guard and the element cap hold for it', async () => {
    const lying = docxParts(para('x'), online).map(entry => (entry.name === 'word/document2.xml' ? { ...entry, declaredSize: 10 } : entry))
    expect(await refusal(buildZip(lying))).toMatch(/"word\/document2.xml" inflates to \d+ bytes but its header declares 10/)
    expect(await refusal(docx('<w:p/>'.repeat(600_000) + para('end'), online))).toMatch(/holds more than 500,000 XML elements/)
  })

  test('one reading of the main part for sniffing and extraction: an external officeDocument relationship names no part', async () => {
    // Before: sniffing skipped it, but the extraction took it for the main part, read word/document2.xml and left the real one out.
    const external = `<Relationship Id="rId0" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document2.xml" TargetMode="External"/>`
    const parts = docxParts(para('Main')).map(entry => (entry.name === '_rels/.rels' ? { ...entry, data: new TextEncoder().encode(new TextDecoder().decode(entry.data).replace('<Relationship ', `${external}<Relationship `)) } : entry))
    const stray = docxParts(para('EXTERNAL-SECRET'), online).find(entry => entry.name === 'word/document2.xml')!
    expect(await text(buildZip([...parts, stray]))).toBe('Main')
    // Sniffing still reads at most 64 KiB of the relationships.
    const padded = docxParts(para('x'), online).map(entry => (entry.name === '_rels/.rels' ? { ...entry, data: new TextEncoder().encode(new TextDecoder().decode(entry.data) + ' '.repeat(70_000)) } : entry))
    expect(await refusal(buildZip(padded))).toMatch(/an Office Open XML package but not a Word, PowerPoint or Excel document/)
  })

  /** `parts` with `name`'s XML rewritten by `edit`. */
  const edited = (parts: ReturnType<typeof docxParts>, name: string, edit: (xml: string) => string) =>
    parts.map(entry => (entry.name === name ? { ...entry, data: new TextEncoder().encode(edit(new TextDecoder().decode(entry.data))) } : entry))
  /** Relationships written with a prefix bound to their namespace, as some writers do: legitimate XML. */
  const prefixed = (xml: string) => xml.replace('<Relationships xmlns=', '<pr:Relationships xmlns:pr=').replaceAll('<Relationship ', '<pr:Relationship ').replace('</Relationships>', '</pr:Relationships>')

  test('relationships written with a namespace prefix are read as Word reads them, by namespace (QA: refused since sniffing used main())', async () => {
    // Before: "not a Word, PowerPoint or Excel document": only an element written `Relationship` counted.
    const parts = docxParts(para('Online'), { ...online, headers: [para('H')] })
    expect(await text(buildZip(edited(edited(parts, '_rels/.rels', prefixed), 'word/_rels/document2.xml.rels', prefixed)))).toBe('[Header]\nH\n\nOnline')
    // A prefix bound to another namespace names no relationship.
    const elsewhere = edited(parts, '_rels/.rels', xml => prefixed(xml).replace('xmlns:pr="http://schemas.openxmlformats.org/package/2006/relationships"', 'xmlns:pr="urn:example:other"'))
    expect(await refusal(buildZip(elsewhere))).toMatch(/an Office Open XML package but not a Word, PowerPoint or Excel document/)
  })

  test('a repeated relationship id does not hide the main part: the first officeDocument relationship is it, as before', async () => {
    // Before: the later relationship of the same id replaced it, and the package was refused.
    const core = '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" Target="docProps/core.xml"/>'
    const parts = edited(docxParts(para('Repeated'), online), '_rels/.rels', xml => xml.replace('</Relationships>', `${core}</Relationships>`))
    expect(await text(buildZip(parts))).toBe('Repeated')
  })

  test('slide facts still read relationships as officeparser does: a prefixed one is none to it', async () => {
    // officeparser then reads the slides in the order of their file numbers, and the facts (here,
    // which slide is hidden) must be numbered so too, not in the order the slide list gives.
    const deck = pptx([{ shapes: textBox('one'), hidden: true }, { shapes: textBox('two') }], { order: [1, 0] })
    const directory = readCentralDirectory(deck, limits.zip)
    if (!directory.ok) throw new Error(directory.message)
    const read = new PackageParts(deck, directory.entries)
    const rewritten = buildZip(directory.entries.map(({ name }) => ({ name, data: new TextEncoder().encode(name === 'ppt/_rels/presentation.xml.rels' ? prefixed(read.text(name)!) : read.text(name)!) })))
    expect(await text(rewritten)).toBe('[Slide 1 (hidden)]\none\n\n[Slide 2]\ntwo')
  })

  test('a main part officeparser does not read is refused by name; without relationships the package is refused as before', async () => {
    expect(await refusal(docx(para('x'), { main: 'word/main.xml' }))).toBe('the Word document keeps its text in a part named "word/main.xml", which is not read; open it in Word and save it again as DOCX')
    const bare = docxParts(para('x'), online).filter(entry => entry.name !== '_rels/.rels')
    expect(await refusal(buildZip(bare))).toMatch(/an Office Open XML package but not a Word, PowerPoint or Excel document/)
  })
})

describe('PPTX footers, slide numbers and hidden slides', () => {
  test("a slide's number placeholder is left out, its footer and date listed once at the end, a hidden slide marked", async () => {
    // Before: "[Slide 1]\nIntro\nAcme — Confidential\n11/28/2026\n1" on every slide, and no sign of the hidden one.
    const chrome = (n: number) => placeholder('ftr', 'Acme — Confidential') + placeholder('dt', '11/28/2026') + placeholder('sldNum', String(n))
    const deck = pptx([
      { shapes: textBox('Intro') + chrome(1) },
      { shapes: textBox('Backup numbers', '2') + chrome(2), hidden: true },
      { shapes: chrome(3) },
      { shapes: textBox('Thanks') + placeholder('sldNum', '4') },
    ])
    expect(await text(deck)).toBe('[Slide 1]\nIntro\n\n[Slide 2 (hidden)]\nBackup numbers\n2\n\n[Slide 4]\nThanks\n\n[Footer]\nAcme — Confidential\n11/28/2026')
  })
})

describe('PPTX slide facts, read as officeparser reads the deck (QA)', () => {
  test("a notes page's number, header and footer placeholders are not its notes: the header and footer are listed once", async () => {
    // Before: "[Notes]\nSpeaker note 1\n1\nAcme Internal\nConfidential" on every slide (Notes and Handouts, Apply to All).
    const notesChrome = (n: number) => textBox(`Speaker note ${n}`) + placeholder('sldNum', String(n)) + placeholder('hdr', 'Acme Internal') + placeholder('ftr', 'Confidential')
    const deck = pptx([{ shapes: textBox('One'), notes: notesChrome(1) }, { shapes: textBox('Two'), notes: notesChrome(2) }])
    expect(await text(deck)).toBe('[Slide 1]\nOne\n[Notes]\nSpeaker note 1\n\n[Slide 2]\nTwo\n[Notes]\nSpeaker note 2\n\n[Footer]\nAcme Internal\nConfidential')
  })

  test("a deck whose only text is its footer keeps the footer", async () => {
    // Before: "" (the footer left every slide, and nothing listed it).
    const deck = pptx([{ shapes: picture + placeholder('ftr', 'Prepared for ACME') + placeholder('sldNum', '1') }, { shapes: picture + placeholder('ftr', 'Prepared for ACME') }])
    expect(await text(deck)).toBe('[Footer]\nPrepared for ACME')
  })

  test('the slide list orders the slides; a list officeparser cannot read (malformed) leaves file order, and the hidden mark follows it', async () => {
    const slides = [{ shapes: textBox('File one') }, { shapes: textBox('File two'), hidden: true }]
    expect(await text(pptx(slides, { order: [1, 0] }))).toBe('[Slide 1 (hidden)]\nFile two\n\n[Slide 2]\nFile one')
    // Before: the list was scanned with a pattern, so the visible slide was marked hidden here.
    expect(await text(pptx(slides, { order: [1, 0], afterList: '<p:notesSz cx="1" cy="1">' }))).toBe('[Slide 1]\nFile one\n\n[Slide 2 (hidden)]\nFile two')
    // Entries inside a comment are not the list's.
    expect(await text(pptx(slides, { order: [0, 1], afterList: '<!-- <p:sldIdLst><p:sldId id="300" r:id="rId2"/></p:sldIdLst> -->' }))).toBe('[Slide 1]\nFile one\n\n[Slide 2 (hidden)]\nFile two')
  })
})

const REL = 'http://schemas.openxmlformats.org/officeDocument/2006/relationships'

describe('hostile list and notes parts stay cheap (QA review)', () => {
  test('a start past Word\'s 32767 counts from 1, and a letter number past eight letters is written as digits', async () => {
    // Before: a start of 999,999,999 made a label of 38 million letters per item (1.7 KB upload, gigabytes).
    const W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    const numbering = (start: string) =>
      `<w:numbering ${W}><w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0"><w:start w:val="${start}"/><w:numFmt w:val="lowerLetter"/><w:lvlText w:val="%1%1)"/></w:lvl></w:abstractNum><w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num></w:numbering>`
    const item = '<w:p><w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr><w:r><w:t>x</w:t></w:r></w:p>'
    const read = (start: string) => text(buildZip(docxParts(item.repeat(2)).concat([{ name: 'word/numbering.xml', data: new TextEncoder().encode(numbering(start)) }])))
    expect(await read('999999999')).toBe('aa) x\nbb) x')
    expect(await read('300')).toBe('300300) x\n301301) x')
  })

  test('a notes page named by every slide is read once', async () => {
    // Before: re-inflated and re-parsed per slide (200 slides naming one 3 MB page: 7 s, past the pool's deadline).
    const bytes = pptx([{ shapes: textBox('One'), notes: textBox('Shared note') + placeholder('sldNum', '1') }, { shapes: textBox('Two') }, { shapes: textBox('Three') }])
    const sniffed = sniff(bytes, limits.zip)
    if (sniffed.kind !== 'zip') throw new Error('not a zip')
    let reads = 0
    class EveryNotesPage extends PackageParts {
      override text(name: string) {
        if (name.startsWith('ppt/notesSlides/notesSlide')) reads += 1
        return super.text(name)
      }
      override relationships(part: string) {
        return part.startsWith('ppt/slides/slide') ? new Map([['rId1', { type: `${REL}/notesSlide`, target: '../notesSlides/notesSlide1.xml', path: 'ppt/notesSlides/notesSlide1.xml', external: false }]]) : super.relationships(part)
      }
    }
    const facts = slideFacts(new EveryNotesPage(bytes, sniffed.entries))
    expect([...facts.values()].map(fact => fact.notes?.numbers)).toEqual([['1'], ['1'], ['1']])
    expect(reads).toBe(1)
  })
})
