import { chartLines, readChart, type ChartBudget } from './charts'
import { walk, type Node } from './office-layout'
import { resolvePartPath, type PackageParts } from './package-parts'

// Where a document's charts are (charts.ts reads each): a presentation's, named by officeparser's
// chart nodes; a Word document's, named by its main part's chart references (as rewritten). Each chart part is
// read once, however many frames show it (a small upload could name one large part thousands of
// times).

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
 * A Word document's charts, in the order its main part shows them, as lines to follow the body:
 * officeparser gives a chart in a paragraph no node, so where it stood is not known. `parts` are
 * the package as rewritten for officeparser (docx-package.ts), so a chart Word does not show (in
 * hidden text, a deleted run, an alternate-content branch Word skips) is no longer referenced.
 * Read only when the package holds a chart part.
 */
export function documentChartLines(parts: PackageParts, budget: ChartBudget): string[] {
  if (!parts.entries.some(entry => entry.name.startsWith('word/charts/'))) return []
  const main = parts.main()
  const relationships = main === undefined ? undefined : parts.relationships(main)
  if (main === undefined || relationships === undefined) return []
  const lines: string[] = []
  const shown = new Set<string>()
  for (const [tag] of (parts.text(main) ?? '').matchAll(/<(?:[\w.-]+:)?chart\s[^>]*>/g)) {
    const id = /\sr:id\s*=\s*(?:"([^"]*)"|'([^']*)')/.exec(tag)
    const relationship = id ? relationships.get(id[1] ?? id[2]!) : undefined
    if (relationship?.path === undefined || !relationship.type.endsWith('/relationships/chart')) continue
    // A relationship's target is a URI: a part named with a space is `chart%201.xml` there.
    const part = decodedPath(relationship.path)
    if (shown.has(part)) continue
    shown.add(part)
    const xml = parts.text(part)
    if (xml !== undefined) lines.push(...(lines.length > 0 ? [''] : []), ...chartLines(readChart(xml, budget), budget))
  }
  return lines
}

function decodedPath(path: string): string {
  try {
    return resolvePartPath('', decodeURIComponent(path))
  } catch {
    return path
  }
}
