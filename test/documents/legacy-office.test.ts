import * as XLSX from '@e965/xlsx'
import { describe, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { extractDocument } from '../../src/documents/extract'
import { ExtractionError, type ExtractionLimits } from '../../src/documents/types'
import { fixture } from './hostile'

// Legacy Office files (OLE2 containers): an XLS is read, a damaged one is named damaged, and a
// .doc or .ppt, or an encrypted DOCX, XLSX or PPTX, is named as such.
const defaults = loadConfig({}).documents
const limits: ExtractionLimits = { maxTextBytes: defaults.maxTextBytes, zip: defaults.zip, pdf: defaults.pdf }

async function refusal(bytes: Uint8Array): Promise<string> {
  const error = await extractDocument(bytes, limits).then(() => undefined, error => error)
  expect(error).toBeInstanceOf(ExtractionError)
  expect((error as ExtractionError).reason).toBe('invalid')
  return (error as ExtractionError).message
}

/** An OLE2 container holding one root stream. */
function container(stream: string, content: Uint8Array): Uint8Array {
  const cfb = XLSX.CFB.utils.cfb_new()
  XLSX.CFB.utils.cfb_add(cfb, stream, content)
  return new Uint8Array(XLSX.CFB.write(cfb, { type: 'array' }) as ArrayBuffer)
}

describe('legacy Office files (OLE2)', () => {
  test('a truncated XLS is named damaged or truncated, not a .doc or .ppt', async () => {
    // Before: "not a readable Excel workbook; legacy .doc and .ppt are not supported, save them as
    // DOCX or PPTX" (QA: the first two thirds of a Calc-made XLS). Cut short, the container's
    // sector tables point past its end, and it cannot be opened at all.
    for (const name of ['sheets.xls', 'formulas.xls']) {
      const xls = await fixture(name)
      for (const length of [1500, Math.floor((xls.byteLength * 2) / 3), xls.byteLength - 100]) {
        const message = await refusal(xls.slice(0, length))
        expect(message).toBe('the file is a damaged or truncated legacy Office file (OLE2); if it is an Excel workbook (XLS), open it in Excel and save it again')
      }
    }
  })

  test('a workbook cut inside its directory (the container opens holding its root alone) is damaged, not a .doc or .ppt', async () => {
    // QA: a LibreOffice XLS larger than these fixtures keeps its directory at byte 8192; cut at 8294
    // the container still opens, holding no stream, and the message blamed a .doc or .ppt. Only a
    // WordDocument or PowerPoint Document stream makes it one; here the root holds another.
    expect(await refusal(container('/Other', new Uint8Array(5000).fill(1)))).toBe('the file is a damaged or truncated legacy Office file (OLE2); if it is an Excel workbook (XLS), open it in Excel and save it again')
  })

  test('a container that opens, holding a workbook stream SheetJS cannot read, is a damaged workbook', async () => {
    const damaged = /^the Excel workbook \(XLS\) is damaged or truncated; open it in Excel and save it again$/
    // BIFF8 (Workbook) and BIFF5 (Book), as xls-guard finds them: at the root.
    expect(await refusal(container('/Workbook', new Uint8Array(3000).fill(7)))).toMatch(damaged)
    expect(await refusal(container('/Book', new Uint8Array(3000).fill(7)))).toMatch(damaged)
    const stream = XLSX.CFB.find(XLSX.CFB.read(await fixture('sheets.xls'), { type: 'array' }), '/Workbook')!.content as Uint8Array
    expect(await refusal(container('/Workbook', stream.slice(0, 100)))).toMatch(damaged)
  })

  test('a .doc or a .ppt is still named as such', async () => {
    const legacy = /^the file is a legacy Office file \(OLE2\) that is not a readable Excel workbook; legacy \.doc and \.ppt are not supported, save them as DOCX or PPTX$/
    expect(await refusal(container('/WordDocument', new Uint8Array(5000).fill(1)))).toMatch(legacy)
    expect(await refusal(container('/PowerPoint Document', new Uint8Array(5000).fill(1)))).toMatch(legacy)
    // A workbook stream deeper in the container (an embedded object) does not make it a workbook.
    const cfb = XLSX.CFB.utils.cfb_new()
    XLSX.CFB.utils.cfb_add(cfb, '/WordDocument', new Uint8Array(5000).fill(1))
    XLSX.CFB.utils.cfb_add(cfb, '/ObjectPool/_1/Workbook', new Uint8Array(3000).fill(7))
    expect(await refusal(new Uint8Array(XLSX.CFB.write(cfb, { type: 'array' }) as ArrayBuffer))).toMatch(legacy)
  })
})

describe('an encrypted Office package (QA: a workbook was refused as one)', () => {
  test('is named as such by its EncryptedPackage stream; a workbook whose cell holds that word is read (before: refused)', async () => {
    const cfb = XLSX.CFB.utils.cfb_new()
    XLSX.CFB.utils.cfb_add(cfb, '/EncryptionInfo', new Uint8Array([4, 0, 4, 0, 0x40, 0, 0, 0]))
    XLSX.CFB.utils.cfb_add(cfb, '/EncryptedPackage', new Uint8Array(5000).fill(7))
    expect(await refusal(new Uint8Array(XLSX.CFB.write(cfb, { type: 'array' }) as ArrayBuffer))).toMatch(/the Office document is encrypted \(password protected\)/)
    // A character past Latin-1 makes the workbook store the cell's text UTF-16, as the stream's name is.
    const workbook = XLSX.utils.book_new()
    XLSX.utils.book_append_sheet(workbook, XLSX.utils.aoa_to_sheet([['EncryptedPackage → see notes']]), 'S')
    const xls = new Uint8Array(XLSX.write(workbook, { type: 'array', bookType: 'biff8' }))
    expect(await extractDocument(xls, limits)).toEqual({ documentType: 'xls', text: '[Sheet: S]\nEncryptedPackage → see notes' })
  })
})
