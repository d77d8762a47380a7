/**
 * Summarises a `.cpuprofile` (bun --cpu-prof) by sample counts rather than time deltas: an idle
 * stretch is one sample with a long delta, so counting samples approximates CPU time. Prints the
 * self samples by file and the top functions, then the inclusive share (the function or anything
 * it called) of the top functions.
 *
 *   bun bench/http/profile-summary.ts FILE.cpuprofile [--match TEXT]
 *
 * `--match TEXT` adds the inclusive share of every function whose name or file contains TEXT.
 */
import { readFileSync } from 'node:fs'

interface Node { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }
const profile = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as { nodes: Node[]; samples: number[] }
const matchAt = process.argv.indexOf('--match')
const match = matchAt > 0 ? process.argv[matchAt + 1] : undefined
const byId = new Map(profile.nodes.map(node => [node.id, node]))
const parent = new Map<number, number>()
for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
const self = new Map<number, number>()
for (const id of profile.samples) self.set(id, (self.get(id) ?? 0) + 1)
// Idle samples (the program waiting for I/O) are not CPU time.
const idle = [...self].filter(([id]) => ['(idle)', '(program)'].includes(byId.get(id)!.callFrame.functionName)).reduce((sum, [, count]) => sum + count, 0)
const total = profile.samples.length - idle
const fileOf = (frame: Node['callFrame']) =>
  frame.url ? frame.url.replace(/^.*node_modules\//, 'nm:').replace(/^.*\/src\//, 'src/') : `(${frame.functionName || 'native'})`
const nameOf = (frame: Node['callFrame']) => `${frame.functionName || '(anonymous)'} ${fileOf(frame)}:${frame.lineNumber + 1}`
const files = new Map<string, number>()
const functions = new Map<string, number>()
const inclusive = new Map<string, number>()
for (const [id, count] of self) {
  const frame = byId.get(id)!.callFrame
  if (['(idle)', '(program)'].includes(frame.functionName)) continue
  files.set(fileOf(frame), (files.get(fileOf(frame)) ?? 0) + count)
  functions.set(nameOf(frame), (functions.get(nameOf(frame)) ?? 0) + count)
  // Each function counts once per stack, however often it recurs in it.
  const seen = new Set<string>()
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
    const name = nameOf(byId.get(at)!.callFrame)
    if (seen.has(name)) continue
    seen.add(name)
    inclusive.set(name, (inclusive.get(name) ?? 0) + count)
  }
}
const format = (entries: Array<[string, number]>) => entries.map(([name, count]) => `${((count / total) * 100).toFixed(1).padStart(5)}%  ${name}`).join('\n')
const top = (map: Map<string, number>, n: number) => format([...map].sort((a, b) => b[1] - a[1]).slice(0, n))
console.log(`${total} samples (${idle} idle left out)\n\n## by file\n${top(files, 30)}\n\n## by function\n${top(functions, 40)}\n\n## inclusive\n${top(inclusive, 60)}`)
if (match) console.log(`\n## inclusive, matching "${match}"\n${format([...inclusive].filter(([name]) => name.includes(match)).sort((a, b) => b[1] - a[1]))}`)
