import { expect } from 'bun:test'
import { ConfigError, loadConfig } from '../../src/config/load'

// Loading config from env and file text for the test/unit/config*.test.ts suites, with the
// problems a refused config reports.

export type Env = Record<string, string | undefined>

/** A readText that must not be called (no SVC_CONFIG). */
export const noFile = (path: string): string => {
  throw new Error(`unexpected read of ${path}`)
}

/** Loads config from `text` as the file named by SVC_CONFIG. */
export function fromFile(text: string, env: Env = {}) {
  const reads: string[] = []
  const config = loadConfig({ SVC_CONFIG: '/etc/svc/config.yaml', ...env }, path => {
    reads.push(path)
    return text
  })
  return { config, reads }
}

/** The ConfigError that loading throws (fails the test when loading succeeds). */
export function problemsOf(load: () => unknown): string[] {
  try {
    load()
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError)
    const problems = (error as ConfigError).problems
    expect(problems.length).toBeGreaterThan(0)
    // The message lists every problem, one per line, for the boot log.
    for (const problem of problems) expect((error as Error).message).toContain(problem)
    return problems
  }
  throw new Error('expected a ConfigError')
}

export function fileProblems(text: string, env: Env = {}): string[] {
  return problemsOf(() => fromFile(text, env))
}

/** The smallest valid config file: one plan. */
export const MINIMAL = 'plans:\n  basic: { monthly_allowance: "0", fusion: false }\n'
