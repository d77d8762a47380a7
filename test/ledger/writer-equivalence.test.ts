import { expect, test } from 'bun:test'
import { join } from 'node:path'

// The writer's batch SQL (one statement per kind over VALUES lists) mirrors the single-op SQL in
// ledger-ops.ts; the differential check in bench/ compares them on random settles. A short run
// here keeps the two from drifting apart unnoticed.
test('aggregated settlement SQL matches the single-op statements on random batches', async () => {
  const script = join(import.meta.dir, '..', '..', 'bench', 'ledger-writer-equivalence.ts')
  const child = Bun.spawn(['bun', script, '--rounds', '150'], { stdout: 'pipe', stderr: 'pipe' })
  const [output, code] = await Promise.all([new Response(child.stdout).text(), child.exited])
  const summary = JSON.parse(output.trim().split('\n').pop()!)
  expect(summary).toMatchObject({ rounds: 150, result_mismatches: 0, differing_tables: [] })
  expect(summary.settles).toBeGreaterThan(1000)
  expect(code).toBe(0)
  // A child process under a loaded machine (the full suite on 2 shared cores) needs more than 5 s.
}, 60_000)
