import { extractOffice, extractWorkbook, FormatRefused, MAX_XML_ELEMENTS } from './office'
import { extractPdf, PdfRefused, prescanPdf } from './pdf'
import { measurePdfStreams } from './pdf-streams'
import { sniff } from './sniff'
import { decodeText, textDocument, textTooLong } from './text'
import { DocumentRefused, ElementCapExceeded, ExtractionError, TextCapExceeded, type Extraction, type ExtractionLimits } from './types'
import { countXlsCells, encryptedPackage, workbookStream, XlsRefused } from './xls-guard'
import { inflateWithinCap, MAX_SHEET_CELLS, tooManyCells } from './zip-guard'

const invalid = (message: string) => new ExtractionError('invalid', message)

/**
 * Bytes → text, routed by content (ARCHITECTURE.md §6). Runs inside an extraction worker,
 * never on the server's event loop. Every expected failure is an ExtractionError('invalid')
 * whose message a person understands; a parser's own exception is turned into one too.
 */
export async function extractDocument(bytes: Uint8Array, limits: ExtractionLimits): Promise<Extraction> {
  const sniffed = sniff(bytes, limits.zip)
  const tooMuchText = textTooLong(limits.maxTextBytes)
  switch (sniffed.kind) {
    case 'reject':
      throw invalid(sniffed.message)
    case 'text': {
      const decoded = decodeText(bytes)
      if (!decoded.ok) throw invalid(decoded.message)
      return textDocument(decoded.text, limits.maxTextBytes)
    }
    case 'pdf': {
      const refused = prescanPdf(bytes, limits.pdf) ?? (await measurePdfStreams(bytes))
      if (refused) throw invalid(refused)
      try {
        return { text: await extractPdf(bytes, { maxPages: limits.pdf.maxPages, maxTextBytes: limits.maxTextBytes }), documentType: 'pdf' }
      } catch (error) {
        if (error instanceof PdfRefused) throw invalid(error.message)
        if (error instanceof TextCapExceeded) throw invalid(tooMuchText)
        if ((error as { name?: string }).name === 'PasswordException') {
          throw invalid('the PDF is encrypted (password protected); remove the password and send it again')
        }
        throw invalid('the PDF is damaged or not a valid PDF file')
      }
    }
    case 'zip': {
      const inflated = inflateWithinCap(bytes, sniffed.entries, limits.zip, sniffed.type === 'xlsx')
      if (!inflated.ok) throw invalid(inflated.message)
      try {
        const text =
          sniffed.type === 'xlsx'
            ? extractWorkbook(bytes, limits.maxTextBytes)
            : await extractOffice(bytes, sniffed.entries, sniffed.type, { maxTextBytes: limits.maxTextBytes, zip: limits.zip })
        return { text, documentType: sniffed.type }
      } catch (error) {
        if (error instanceof TextCapExceeded) throw invalid(tooMuchText)
        if (error instanceof FormatRefused || error instanceof DocumentRefused) throw invalid(error.message)
        const issue = (error as { officeIssue?: { code?: string } }).officeIssue?.code
        if (issue === 'XML_ELEMENT_LIMIT_EXCEEDED' || error instanceof ElementCapExceeded) {
          throw invalid(`the ${sniffed.type.toUpperCase()} document holds more than ${MAX_XML_ELEMENTS.toLocaleString('en')} XML elements; split it into smaller documents`)
        }
        // officeparser's refusal of elements nested past its limit or past what the stack holds
        // (tables in tables: 5,000 deep are read in a worker, 8,000 not): no real document nests so.
        if (issue === 'MAX_NESTING_DEPTH_EXCEEDED') {
          throw invalid(`the ${sniffed.type.toUpperCase()} document nests its elements (tables within tables, say) too deeply to read`)
        }
        throw invalid(`the ${sniffed.type.toUpperCase()} file is damaged or not a valid ${sniffed.type.toUpperCase()} document`)
      }
    }
    case 'ole2': {
      // Password-protected DOCX/XLSX/PPTX are OLE2 containers holding an EncryptedPackage stream.
      if (encryptedPackage(bytes)) {
        throw invalid('the Office document is encrypted (password protected); remove the password and send it again')
      }
      let cells: number | undefined
      try {
        cells = countXlsCells(bytes, MAX_SHEET_CELLS)
      } catch (error) {
        throw error instanceof XlsRefused ? invalid(error.message) : error
      }
      if (cells !== undefined && cells > MAX_SHEET_CELLS) throw invalid(tooManyCells)
      try {
        return { text: extractWorkbook(bytes, limits.maxTextBytes), documentType: 'xls' }
      } catch (error) {
        if (error instanceof TextCapExceeded) throw invalid(tooMuchText)
        if (error instanceof FormatRefused) throw invalid(error.message)
        // SheetJS's words for a FILEPASS record (any of Excel's password schemes).
        if (/password-protected/i.test((error as Error).message ?? '')) {
          throw invalid('the Excel workbook is encrypted (password protected); remove the password and send it again')
        }
        // Named by what the container holds: a workbook stream SheetJS could not read, or a
        // container it could not open (cut short, its sector tables point past its end), is damaged,
        // not a .doc or a .ppt, whose streams are others.
        const held = workbookStream(bytes)
        if (held.readable && held.stream !== undefined) throw invalid('the Excel workbook (XLS) is damaged or truncated; open it in Excel and save it again')
        if (held.readable && held.wordOrPowerPoint) throw invalid('the file is a legacy Office file (OLE2) that is not a readable Excel workbook; legacy .doc and .ppt are not supported, save them as DOCX or PPTX')
        throw invalid('the file is a damaged or truncated legacy Office file (OLE2); if it is an Excel workbook (XLS), open it in Excel and save it again')
      }
    }
  }
}
