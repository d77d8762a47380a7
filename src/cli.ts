#!/usr/bin/env bun
// The `svc` executable. Only this file and src/lib/heap-ram.ts (with held-signals.ts) load before
// the command is known: `svc serve` may re-execute itself to size JavaScriptCore's heap for a
// server (heap-ram.ts), and a module graph loaded before that (~600 modules, ~100 ms) would be
// loaded twice.
import { reexecWithHeapRam } from './lib/heap-ram'
import { holdSignals } from './lib/held-signals'

const argv = process.argv.slice(2)
const serving = argv.length === 0 || (argv.length === 1 && argv[0] === 'serve')
if (serving) {
  reexecWithHeapRam()
  // After it: the process an execve replaces keeps no handler (serve acts on a held signal).
  holdSignals()
}
const { runCli } = await import('./commands')
const code = await runCli(argv)
if (code !== 0 || !serving) process.exit(code)
