import { chartLines, readChart, type ChartBudget } from './charts'
import { NOTES_PART, PAGE_PART } from './docx-package'
import type { PageKind } from './docx-sections'
import { walk, type DocxCharts, type Node, type NoteKind } from './office-layout'
import { resolvePartPath, type PackageParts, type Relationship } from './package-parts'
import { scanXml } from './xml-scan'

// Where a document's charts are (charts.ts reads each): a presentation's, named by officeparser's
// chart nodes; a Word document's, named by the chart references of its parts (as rewritten). Each
// chart part is read once, however many frames show it (a small upload could name one large part
// thousands of times).

/**
 * Gives each chart node of a presentation's AST (officeparser's `chart`, named by its part's file
 * name) its chart's lines as text, read from the package's `ppt/charts/` part. A chart whose part
 * is missing or unreadable, or was shown by an earlier frame, keeps its empty text.
 */
export function fillCharts(nodes: Node[], parts: PackageParts, budget: ChartBudget): void {
  const shown = new Set<string>()
  walk(nodes, node => {
    if (node.type !== 'chart') return !!node.children?.length
    const name = node.metadata?.attachmentName
    const part = `ppt/charts/${typeof name === 'string' ? name : ''}`
    if (shown.has(part)) return false
    shown.add(part)
    const xml = parts.text(part)
    if (xml !== undefined) node.text = chartLines(readChart(xml, budget), budget).join('\n')
    return false
  })
}

/**
 * A Word document's charts, read where the part showing them is read (office-layout.ts asks for
 * them in its reading order: headers, body, notes, footers), each part once, at its first place:
 * officeparser gives a chart in a paragraph no node, so where it stood in its part is not known.
 * `parts` are the package as rewritten for officeparser (docx-package.ts), so a chart Word does not
 * show (in hidden text, a deleted run, an alternate-content branch Word skips) is no longer
 * referenced, and a header or footer no section shows is empty. Only the parts the rewrite reached
 * are read: the main one, the header and footer parts it names that officeparser reads, and its
 * footnotes and endnotes parts when they are the ones officeparser reads; a note's charts only when
 * the body shows the note. Read only when the package holds a chart part.
 */
export class WordCharts implements DocxCharts {
  private readonly shown = new Set<string>()
  private readonly main: string | undefined
  /** What the main part's relationships name. */
  private readonly named: Relationship[]
  /** File order: the order officeparser meets the parts in. */
  private readonly names: string[]
  private readonly notes = new Map<NoteKind, { part: string; byNote: Map<string, string[]> } | undefined>()

  constructor(
    private readonly parts: PackageParts,
    private readonly budget: ChartBudget,
  ) {
    const main = parts.entries.some(entry => entry.name.startsWith('word/charts/')) ? parts.main() : undefined
    const named = main === undefined ? undefined : parts.relationships(main)
    this.main = named === undefined ? undefined : main
    this.named = [...(named?.values() ?? [])]
    this.names = [...parts.entries].sort((a, b) => a.localHeaderOffset - b.localHeaderOffset).map(entry => entry.name)
  }

  body(): string[] {
    return this.main === undefined ? [] : this.lines(this.main, chartReferences(this.parts.text(this.main)).map(({ id }) => id), [''])
  }

  pages(kind: PageKind): string[] {
    const named = new Set(this.named.filter(({ type }) => type.endsWith(`/${kind}`)).map(({ path }) => path))
    return this.names.filter(name => named.has(name) && PAGE_PART.test(name)).flatMap(part => this.lines(part, chartReferences(this.parts.text(part)).map(({ id }) => id)))
  }

  note(kind: NoteKind, id: string): string[] {
    if (!this.notes.has(kind)) this.notes.set(kind, this.readNotes(kind))
    const notes = this.notes.get(kind)
    return notes === undefined ? [] : this.lines(notes.part, notes.byNote.get(id) ?? [])
  }

  /** The notes part of `kind` Word shows when officeparser reads it too, and the charts of each note in it. */
  private readNotes(kind: NoteKind): { part: string; byNote: Map<string, string[]> } | undefined {
    const part = this.named.find(({ type }) => type.endsWith(`/${kind}s`))?.path
    if (part === undefined || part !== this.names.find(name => NOTES_PART[kind].test(name))) return undefined
    const byNote = new Map<string, string[]>()
    for (const { id, note } of chartReferences(this.parts.text(part))) {
      if (note === undefined) continue
      const ids = byNote.get(note) ?? []
      byNote.set(note, ids)
      ids.push(id)
    }
    return { part, byNote }
  }

  /** The lines of the charts `ids` (relationship ids of `part`) name, those read before left out; `between` separates two charts. */
  private lines(part: string, ids: string[], between: string[] = []): string[] {
    const relationships = ids.length === 0 ? undefined : this.parts.relationships(part)
    const lines: string[] = []
    for (const id of ids) {
      const relationship = relationships?.get(id)
      if (relationship?.path === undefined || !relationship.type.endsWith('/relationships/chart')) continue
      // A relationship's target is a URI: a part named with a space is `chart%201.xml` there.
      const chart = decodedPath(relationship.path)
      if (this.shown.has(chart)) continue
      this.shown.add(chart)
      const xml = this.parts.text(chart)
      if (xml !== undefined) lines.push(...(lines.length > 0 ? between : []), ...chartLines(readChart(xml, this.budget), this.budget))
    }
    return lines
  }
}

/**
 * The chart references (`c:chart`, any prefix, with an `r:id`) in a Word part's XML, in order,
 * each with the footnote or endnote it stands in (`w:footnote`, `w:endnote` and `w:id` as
 * officeparser names them). Read as XML, so a comment or CDATA section holding one is not one.
 */
function chartReferences(xml: string | undefined): Array<{ id: string; note?: string }> {
  const found: Array<{ id: string; note?: string }> = []
  if (xml === undefined) return found
  const notes: Array<string | undefined> = []
  scanXml(
    xml,
    (name, attributes) => {
      if (name === 'w:footnote' || name === 'w:endnote') notes.push(attributes['w:id'])
      else if (CHART.test(name) && attributes['r:id'] !== undefined) found.push({ id: attributes['r:id'], note: notes.at(-1) })
    },
    {
      onClose(name) {
        if (name === 'w:footnote' || name === 'w:endnote') notes.pop()
      },
    },
  )
  return found
}

const CHART = /^(?:[\w.-]+:)?chart$/

function decodedPath(path: string): string {
  try {
    return resolvePartPath('', decodeURIComponent(path))
  } catch {
    return path
  }
}
