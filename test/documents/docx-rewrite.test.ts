import { describe, expect, test } from 'bun:test'
import { readCentralDirectory, readSmallEntry, replaceEntries } from '../../src/documents/zip-guard'
import { buildZip } from './hostile'

// The DOCX rewrite before officeparser (docx-rewrite.ts), and the zip it writes (replaceEntries).
const encoder = new TextEncoder()
const zipLimits = { maxEntries: 100, maxInflatedBytes: 1 << 20, maxRatio: 100 }

function entriesOf(bytes: Uint8Array) {
  const directory = readCentralDirectory(bytes, zipLimits)
  if (!directory.ok) throw new Error(directory.message)
  return directory.entries
}

describe('replaceEntries: the package again, some entries replaced', () => {
  test("a replaced entry is stored; the others' compressed bytes are copied as they are", () => {
    const original = buildZip([
      { name: 'a.xml', data: encoder.encode('<a>kept</a>'.repeat(50)) },
      { name: 'word/document.xml', data: encoder.encode('<old/>') },
    ])
    const entries = entriesOf(original)
    const rewritten = replaceEntries(original, entries, new Map([[entries[1]!, encoder.encode('<new/>')]]))
    const after = entriesOf(rewritten)
    expect(after.map(({ name, method, crc, uncompressedSize }) => ({ name, method, crc, uncompressedSize }))).toEqual([
      { name: 'a.xml', method: 8, crc: entries[0]!.crc, uncompressedSize: entries[0]!.uncompressedSize },
      { name: 'word/document.xml', method: 0, crc: expect.any(Number), uncompressedSize: 6 },
    ])
    const read = (index: number) => new TextDecoder().decode(readSmallEntry(rewritten, after[index]!, 1000))
    expect(read(0)).toBe('<a>kept</a>'.repeat(50))
    expect(read(1)).toBe('<new/>')
    expect(after[0]!.compressedSize).toBe(entries[0]!.compressedSize)
  })

  test('two central records naming one local header give one entry (the local headers are what officeparser reads)', () => {
    const original = buildZip([{ name: 'a.xml', data: encoder.encode('<a/>') }])
    const entries = entriesOf(original)
    expect(entriesOf(replaceEntries(original, [entries[0]!, { ...entries[0]! }], new Map())).map(entry => entry.name)).toEqual(['a.xml'])
  })
})
