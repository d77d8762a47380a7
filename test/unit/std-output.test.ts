import { expect, test } from 'bun:test'
import { join } from 'node:path'

// stdOutput's checked writes (src/lib/std-output.ts) on a pipe its reader empties slower than
// they fill it: once process.stdout has been touched, Bun makes the descriptor non-blocking, and
// a bare writeSync then threw EAGAIN (or wrote part of the text) past the pipe's 64 KiB.

const MODULE = join(import.meta.dir, '..', '..', 'src', 'lib', 'std-output.ts')

test('a line larger than the pipe is written whole, through a non-blocking standard output', async () => {
  const script = `import { stdOutput } from ${JSON.stringify(MODULE)}; void process.stdout; stdOutput.out('x'.repeat(1_000_000))`
  const child = Bun.spawn([process.execPath, '-e', script], { stdout: 'pipe', stderr: 'pipe' })
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  expect({ code, stderr, length: stdout.length }).toEqual({ code: 0, stderr: '', length: 1_000_001 })
})
