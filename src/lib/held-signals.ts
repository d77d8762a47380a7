// `svc serve` handles SIGTERM and SIGINT only once its deps are open (src/main.ts); before that
// (the module graph loads, the configuration is read, the database opened: ~0.1 s) a signal took
// Bun's default and killed the process with 143, where README promises that a signal during the
// boot ends it at its next step and exits 0 (QA). src/cli.ts holds them from its start instead.
// Only `serve`: any other command killed by Ctrl-C dies at once, as a command should.
const SIGNALS = ['SIGTERM', 'SIGINT'] as const
let held: string | undefined
const hold = (signal: string) => {
  held ??= signal
}

/** From now on SIGTERM and SIGINT are kept, not fatal, until `releaseSignals`. */
export function holdSignals(): void {
  for (const signal of SIGNALS) process.on(signal, hold)
}

/** Stops holding signals (the caller has its own handlers by now); the first one held, if any. */
export function releaseSignals(): string | undefined {
  for (const signal of SIGNALS) process.off(signal, hold)
  return held
}
