import { expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { extractDocument } from '../../src/documents/extract'
import type { ExtractionLimits } from '../../src/documents/types'
import { formLayerGroups, mayHideForms } from '../../src/documents/pdf-form-layers'
import type { Layers } from '../../src/documents/pdf-layers'
import { pdfFile, pdfFileWithObjectStream, stream } from './pdf-file'

// Text in a PDF layer (optional content) that is switched off: viewers and pdftotext do not show
// it, and pdf.js's getTextContent gave it all the same (QA: a hidden layer's text reached the model).
const defaults = loadConfig({}).documents
const limits: ExtractionLimits = { maxTextBytes: defaults.maxTextBytes, zip: defaults.zip, pdf: defaults.pdf }

/**
 * A one-page PDF whose content stream is `content` (Helvetica as /F1), with `layers` as its
 * catalog's /OCProperties and `objects` numbered from 6 on. The page names resources
 * `properties` (/oc name → object) and `xobjects` (/name → object).
 */
function layeredPdf(spec: { layers: string; properties: Record<string, number>; xobjects?: Record<string, number>; content: string; objects: string[] }): Uint8Array {
  const names = (entries: Record<string, number> = {}) => Object.entries(entries).map(([name, object]) => `/${name} ${object} 0 R`).join(' ')
  return pdfFile([
    `<< /Type /Catalog /Pages 2 0 R /OCProperties ${spec.layers} >>`,
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> /Properties << ${names(spec.properties)} >> /XObject << ${names(spec.xobjects)} >> >> /Contents 5 0 R >>`,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
    stream(spec.content),
    ...spec.objects,
  ])
}

const line = (y: number, text: string, x = 72) => `BT /F1 14 Tf ${x} ${y} Td (${text}) Tj ET`
const text = async (pdf: Uint8Array) => (await extractDocument(pdf, limits)).text

test.each([
  ['listed in /OFF', '/D << /OFF [6 0 R] >>'],
  ['off by the base state', '/D << /BaseState /OFF >>'],
])('the text of a layer switched off (%s) is left out', async (_, defaultConfig) => {
  const pdf = layeredPdf({
    layers: `<< /OCGs [6 0 R] ${defaultConfig} >>`,
    properties: { oc1: 6 },
    content: `${line(700, 'Visible line one')}\n/OC /oc1 BDC ${line(680, 'HIDDENLAYERTEXT')} EMC`,
    objects: ['<< /Type /OCG /Name (Secret) >>'],
  })
  expect(await text(pdf)).toBe('Visible line one')
})

test('a switched-off layer hides what it encloses, other marked content included; lines around it keep their breaks', async () => {
  const pdf = layeredPdf({
    layers: '<< /OCGs [6 0 R 7 0 R] /D << /OFF [6 0 R] >> >>',
    properties: { secret: 6, shown: 7 },
    content: [
      `/Span << /MCID 0 >> BDC ${line(700, 'Line one')} EMC`,
      `/OC /shown BDC /P << /MCID 1 >> BDC ${line(680, 'Line two')} EMC EMC`,
      `/OC /secret BDC ${line(660, 'HIDDEN_A')} /Artifact BMC ${line(640, 'HIDDEN_B')} EMC /OC /shown BDC ${line(620, 'HIDDEN_C')} EMC EMC`,
      line(600, 'Line three'),
      `/OC /secret BDC ${line(580, 'HIDDEN_D')} EMC ${line(580, 'Line four', 300)}`,
      'EMC', // closing nothing: ignored
      line(560, 'Line five'),
    ].join('\n'),
    objects: ['<< /Type /OCG /Name (Secret) >>', '<< /Type /OCG /Name (Shown) >>'],
  })
  expect(await text(pdf)).toBe('Line one\nLine two\nLine three\nLine four\nLine five')
})

test('a membership dictionary (OCMD) shows its text as its policy or visibility expression says', async () => {
  const pdf = layeredPdf({
    layers: '<< /OCGs [6 0 R 7 0 R] /D << /OFF [6 0 R] >> >>',
    properties: { allOn: 8, anyOn: 9, notOff: 10, one: 11 },
    content: [
      `/OC /allOn BDC ${line(700, 'ALL_ON_HIDDEN')} EMC`,
      `/OC /anyOn BDC ${line(680, 'Any on')} EMC`,
      `/OC /notOff BDC ${line(660, 'Not off')} EMC`,
      `/OC /one BDC ${line(640, 'ONE_OFF_HIDDEN')} EMC`,
    ].join('\n'),
    objects: [
      '<< /Type /OCG /Name (Off) >>',
      '<< /Type /OCG /Name (On) >>',
      '<< /Type /OCMD /OCGs [6 0 R 7 0 R] /P /AllOn >>',
      '<< /Type /OCMD /OCGs [6 0 R 7 0 R] /P /AnyOn >>',
      '<< /Type /OCMD /VE [/Not 6 0 R] >>',
      '<< /Type /OCMD /OCGs 6 0 R >>',
    ],
  })
  expect(await text(pdf)).toBe('Any on\nNot off')
})

test('forms and images with a layer of their own do not shift which layer later text is in', async () => {
  // pdf.js's operator list, where the layers are read, wraps such a form or image in a marked
  // sequence of its own that the text content lacks.
  const pdf = layeredPdf({
    layers: '<< /OCGs [6 0 R 7 0 R] /D << /OFF [6 0 R] >> >>',
    properties: { secret: 6, shown: 7 },
    xobjects: { Own: 8, Plain: 9, Dot: 10 },
    content: [
      line(720, 'Intro'),
      '/Own Do',
      `q 10 0 0 10 72 500 cm /Dot Do Q`,
      `/OC /secret BDC ${line(680, 'HIDDEN_A')} EMC`,
      '/OC /secret BDC /Own Do EMC',
      '/OC /shown BDC /Plain Do EMC',
      '/OC /secret BDC /Plain Do EMC',
      `/OC /shown BDC ${line(600, 'Last line')} EMC`,
    ].join('\n'),
    objects: [
      '<< /Type /OCG /Name (Secret) >>',
      '<< /Type /OCG /Name (Shown) >>',
      stream(line(700, 'Own layer form'), '/Type /XObject /Subtype /Form /BBox [0 0 612 792] /OC 7 0 R /Resources << /Font << /F1 4 0 R >> >>'),
      stream(line(640, 'Plain form'), '/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >>'),
      stream('\u0080', '/Type /XObject /Subtype /Image /Width 1 /Height 1 /ColorSpace /DeviceGray /BitsPerComponent 8 /OC 6 0 R'),
    ],
  })
  // (pdf.js reads each form's text afresh, with no line break before it.)
  expect(await text(pdf)).toBe('IntroOwn layer form\nPlain form\nLast line')
})

test("a form with a layer of its own whose text starts in another layer: each layer's text as its layer says", async () => {
  // Right before the form, the operator list's start of the form's layer could as well be the
  // start of a layer written before the Do; only the form reading tells this page's layers apart.
  const pdf = layeredPdf({
    layers: '<< /OCGs [6 0 R 7 0 R] /D << /OFF [6 0 R] >> >>',
    properties: { secret: 6, shown: 7 },
    xobjects: { Own: 8 },
    content: [`/OC /shown BDC ${line(700, 'First line')} EMC`, '/Own Do', `/OC /shown BDC ${line(640, 'Last line')} EMC`].join('\n'),
    objects: [
      '<< /Type /OCG /Name (Secret) >>',
      '<< /Type /OCG /Name (Shown) >>',
      stream(`/OC /secret BDC ${line(680, 'HIDDEN_IN_FORM')} EMC ${line(660, 'Form line')}`, '/Type /XObject /Subtype /Form /BBox [0 0 612 792] /OC 7 0 R /Resources << /Font << /F1 4 0 R >> /Properties << /secret 6 0 R >> >>'),
    ],
  })
  expect(await text(pdf)).toBe('First line\nForm line\nLast line')
})

test('form field values and typed text in a switched-off layer are left out, as viewers leave them out (the group, or a membership dictionary over it)', async () => {
  // QA: each of these reached the text, as pdf.js hands annotations over whatever their /OC says.
  const annotation = (entries: string) => `<< /Type /Annot /Rect [72 600 300 620] ${entries} >>`
  const pdf = pdfFile([
    '<< /Type /Catalog /Pages 2 0 R /OCProperties << /OCGs [6 0 R 7 0 R] /D << /OFF [6 0 R] >> >> /AcroForm << /Fields [10 0 R 11 0 R] >> >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R /Annots [8 0 R 9 0 R 10 0 R 11 0 R 12 0 R 13 0 R] >>',
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
    stream(line(700, 'Body text')),
    '<< /Type /OCG /Name (Secret) >>',
    '<< /Type /OCG /Name (Shown) >>',
    annotation('/Subtype /FreeText /OC 6 0 R /Contents (HIDDEN_TYPED) /DA (/Helv 12 Tf 0 g)'),
    annotation('/Subtype /FreeText /OC 14 0 R /Contents (HIDDEN_BY_OCMD) /DA (/Helv 12 Tf 0 g)'),
    annotation('/Subtype /Widget /FT /Tx /T (secret) /OC 6 0 R /V (HIDDEN_FIELD)'),
    annotation('/Subtype /Widget /FT /Tx /T (shown) /OC 7 0 R /V (Shown field)'),
    annotation('/Subtype /FreeText /OC 15 0 R /Contents (Typed, shown) /DA (/Helv 12 Tf 0 g)'),
    annotation('/Subtype /FreeText /Contents (Typed, no layer) /DA (/Helv 12 Tf 0 g)'),
    '<< /Type /OCMD /OCGs [6 0 R] /P /AnyOn >>',
    '<< /Type /OCMD /VE [/Not 6 0 R] >>',
  ])
  // (pdf.js lists the page's FreeText annotations before its widgets.)
  expect(await text(pdf)).toBe('Body text\nTyped, shown\nTyped, no layer\nShown field')
})

test('the text of a form XObject whose own dictionary names a switched-off layer is left out, nested forms and a transparency group too (before: read)', async () => {
  const form = (content: string, entries: string, fonts = '/F1 4 0 R') => stream(content, `/Type /XObject /Subtype /Form /BBox [0 0 612 792] ${entries} /Resources << /Font << ${fonts} >> /XObject << /Inner 10 0 R /Shown 11 0 R >> >>`)
  const pdf = layeredPdf({
    layers: '<< /OCGs [6 0 R 7 0 R] /D << /OFF [6 0 R] >> >>',
    properties: {},
    xobjects: { Hidden: 8, ByMembership: 9, Shown: 11, Group: 12 },
    content: [line(720, 'Intro'), '/Hidden Do', line(660, 'Middle'), '/ByMembership Do', '/Shown Do', '/Group Do', line(560, 'Last line')].join('\n'),
    objects: [
      '<< /Type /OCG /Name (Watermark) >>',
      '<< /Type /OCG /Name (Shown) >>',
      // Off, with a form inside it whose own layer is on: what a hidden form holds stays hidden.
      form(`${line(700, 'HIDDEN_FORM')} /Inner Do /Shown Do`, '/OC 6 0 R'),
      // The key written with #-escapes, as pdf.js reads names.
      form(line(640, 'HIDDEN_BY_MEMBERSHIP'), '/O#43 13 0 R'),
      form(line(680, 'HIDDEN_INNER'), ''),
      form(line(620, 'Shown form'), '/OC 7 0 R'),
      // Marked-content operators left unbalanced inside do not end the form early.
      form(`${line(600, 'HIDDEN_GROUP')} EMC EMC ${line(580, 'HIDDEN_AFTER_EMC')}`, '/OC 6 0 R /Group << /S /Transparency >>'),
      '<< /Type /OCMD /OCGs [6 0 R] /P /AllOn >>',
    ],
  })
  // pdftotext gives Intro, Middle, Shown form, Last line. (pdf.js reads each form's text afresh, with no line break before it.)
  expect(await text(pdf)).toBe('Intro\nMiddleShown form\nLast line')
})

test('a form whose layer is switched off is found in an object stream too, where its dictionary is compressed (before: its text was read)', async () => {
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R /OCProperties << /OCGs [6 0 R] /D << /OFF [6 0 R] >> >> >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> /XObject << /A 7 0 R >> >> /Contents 5 0 R >>',
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
    stream([line(720, 'Intro'), '/A Do', line(600, 'End')].join('\n')),
    '<< /Type /OCG /Name (Off) >>',
    stream(line(700, 'HIDDEN_COMPRESSED_FORM'), '/Type /XObject /Subtype /Form /BBox [0 0 612 792] /OC 6 0 R /Resources << /Font << /F1 4 0 R >> >>'),
  ]
  expect(await text(pdfFileWithObjectStream(objects, [6, 7]))).toBe('Intro\nEnd')
})

test('a form in a switched-off layer whose dictionary holds `<<` in a string is found, its dictionary read as pdf.js reads it (before: read back as text to the `<<`, its /OC lost and its text read)', async () => {
  const pdf = layeredPdf({
    layers: '<< /OCGs [6 0 R] /D << /OFF [6 0 R] >> >>',
    properties: {},
    xobjects: { Hidden: 7 },
    content: [line(720, 'Intro'), '/Hidden Do', line(600, 'End')].join('\n'),
    objects: [
      '<< /Type /OCG /Name (Off) >>',
      stream(line(700, 'HIDDEN_FORM'), '/Type /XObject /Subtype /Form /BBox [0 0 612 792] /OC 6 0 R /T (<<) /Resources << /Font << /F1 4 0 R >> >>'),
    ],
  })
  expect(await text(pdf)).toBe('Intro\nEnd')
})

test('object streams: those pdf.js inflates are looked into; one that holds a stream or a membership type, or that is not Flate alone, may hide a form', () => {
  const form = stream('q Q', '/Subtype /Form /OC 6 0 R')
  const objects = ['<< /Type /Catalog >>', '<< /Type /OCG /Name (A) >>', form, '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>']
  expect(formLayerGroups(pdfFileWithObjectStream(objects, [2, 4]))).toEqual(['6R'])
  // The form itself stored there: its dictionary shows in no object header's reading.
  expect(formLayerGroups(pdfFileWithObjectStream(objects, [2, 3]))).toBeUndefined()
  expect(formLayerGroups(pdfFileWithObjectStream([...objects, '<< /Type /OCMD /OCGs [2 0 R] /P /AllOff >>'], [2, 5]))).toBeUndefined()
  // Uncompressed, or in a chain not inflated here: unseen.
  const objectStream = (entries: string) => new TextEncoder().encode(`1 0 obj\n${form}\nendobj\n2 0 obj\n${stream('7 0 << /A 1 >>', `/Type /ObjStm /N 1 /First 4 ${entries}`)}\nendobj\n`)
  expect([objectStream(''), objectStream('/Filter /LZWDecode'), objectStream('/Filter 9 0 R')].map(formLayerGroups)).toEqual([undefined, undefined, undefined])
})

test("a page's operator list is read for forms only when a form's own layer may be hidden as the document opens", () => {
  const groups = (...dictionaries: string[]) => formLayerGroups(new TextEncoder().encode(dictionaries.map((entries, index) => `${index + 1} 0 obj\n${stream('q Q', entries)}\nendobj\n`).join('')))
  // A form naming a group by reference, its key #-escaped too, a later generation; an image's
  // layer, an annotation's (no stream) and a layer mark in a content stream name none.
  expect(groups('/Subtype /Form /OC 6 0 R', '/Subtype /Form /O#43 7 0 R', '/Subtype /Form /OC 8 1 R')).toEqual(['6R', '7R', '8R1'])
  expect(groups('/Subtype /Image /OC 6 0 R')).toEqual([])
  expect(formLayerGroups(new TextEncoder().encode('1 0 obj << /Type /Annot /OC 6 0 R >> endobj 2 0 obj << /Length 20 >>\nstream\n/OC /x BDC EMC\nendstream'))).toEqual([])
  // A membership dictionary, given inline or anywhere beside a form naming a group, may hide it whatever its groups say; so may what cannot be read.
  expect(groups('/Subtype /Form /OC << /Type /OCMD /OCGs [6 0 R] >>')).toBeUndefined()
  expect(formLayerGroups(new TextEncoder().encode(`1 0 obj << /Type /OCMD /P /AllOff >> endobj 2 0 obj\n${stream('q Q', '/Subtype /Form /OC 1 0 R')}`))).toBeUndefined()
  // Dictionaries read as pdf.js's parser reads them (pdf-dictionary.ts): the last of a repeated
  // key, a comment before the keyword skipped, /OC inside a string or a nested dictionary not the
  // stream's (before, read as text: a repeated or commented dictionary was unseen).
  expect(groups('/Subtype /Form /OC /x /OC 6 0 R', '/Subtype /Image /Subtype /Form /OC 7 0 R', '/Subtype /Form /T (/OC /x) /Group << /OC /y >>')).toEqual(['6R', '7R'])
  expect(formLayerGroups(new TextEncoder().encode('1 0 obj << /Subtype /Form /OC 6 0 R >> % a comment\nstream\nq Q\nendstream'))).toEqual(['6R'])
  // A dictionary no object header reads to (as in an uncompressed object stream, whose objects
  // pdf.js may start anywhere) cannot be seen; a stray word `stream` in a content stream is none.
  expect(formLayerGroups(new TextEncoder().encode('<< /Subtype /Form /OC 6 0 R >> % a comment\nstream\nq Q\nendstream'))).toBeUndefined()
  expect(formLayerGroups(new TextEncoder().encode(`1 0 obj\n${stream('BT (a stream of words) Tj ET')}\nendobj\n2 0 obj\n${stream('q Q', '/Subtype /Form /OC 6 0 R')}`))).toEqual(['6R'])
  // Then, with the document's layers: a group it lists and shows hides nothing.
  const layers = { getGroup: (id: string) => (['6R', '7R'].includes(id) ? {} : null), isVisible: ({ id }: { id: string }) => id === '6R' } as unknown as Layers
  expect([mayHideForms([], layers), mayHideForms(['6R'], layers), mayHideForms(['6R', '7R'], layers), mayHideForms(['9R'], layers), mayHideForms(undefined, layers)]).toEqual([false, false, true, true, true])
})
