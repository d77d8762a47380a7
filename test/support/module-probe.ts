// Preloaded into a gateway child (`bun --preload`, test/ops/boot-footprint.test.ts): on SIGUSR2
// it writes the paths of every module loaded so far (Bun's registry, ESM included) as JSON to
// MODULE_PROBE_FILE, through a rename so the reader never sees half a file.
import { renameSync, writeFileSync } from 'node:fs'

const target = process.env.MODULE_PROBE_FILE
if (!target) throw new Error('module-probe: MODULE_PROBE_FILE is not set')
process.on('SIGUSR2', () => {
  writeFileSync(`${target}.partial`, JSON.stringify(Object.keys(require.cache)))
  renameSync(`${target}.partial`, target)
})
