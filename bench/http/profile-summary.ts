/**
 * Summarises a `.cpuprofile` (bun --cpu-prof) by sample counts rather than time deltas: an idle
 * stretch is one sample with a long delta, so counting samples approximates CPU time. Prints the
 * self samples by file and the top functions. `bun bench/http/profile-summary.ts FILE.cpuprofile`
 */
import { readFileSync } from 'node:fs'

interface Node { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }
const profile = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as { nodes: Node[]; samples: number[] }
const byId = new Map(profile.nodes.map(node => [node.id, node]))
const self = new Map<number, number>()
for (const id of profile.samples) self.set(id, (self.get(id) ?? 0) + 1)
const total = profile.samples.length
const files = new Map<string, number>()
const functions = new Map<string, number>()
for (const [id, count] of self) {
  const frame = byId.get(id)!.callFrame
  const file = frame.url ? frame.url.replace(/^.*node_modules\//, 'nm:').replace(/^.*\/src\//, 'src/') : `(${frame.functionName || 'native'})`
  files.set(file, (files.get(file) ?? 0) + count)
  const name = `${frame.functionName || '(anonymous)'} ${file}:${frame.lineNumber + 1}`
  functions.set(name, (functions.get(name) ?? 0) + count)
}
const top = (map: Map<string, number>, n: number) =>
  [...map].sort((a, b) => b[1] - a[1]).slice(0, n).map(([name, count]) => `${((count / total) * 100).toFixed(1).padStart(5)}%  ${name}`).join('\n')
console.log(`${total} samples\n\n## by file\n${top(files, 30)}\n\n## by function\n${top(functions, 40)}`)
