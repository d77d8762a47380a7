import type { Client } from '@libsql/client'

export type DatabaseMode = 'ok' | 'unreachable'

const FAILING = ['execute', 'batch', 'transaction', 'executeMultiple', 'migrate'] as const

/**
 * Makes every query of a libSQL client fail while switched to `unreachable` (a network
 * partition). Patched in place, so an app already built on the client (buildTestApp's) sees it.
 */
export function switchable(client: Client): { client: Client; set(mode: DatabaseMode): void } {
  const own = new Map(FAILING.map(name => [name, Object.getOwnPropertyDescriptor(client, name)]))
  const fail = async () => {
    throw Object.assign(new Error('ECONNREFUSED: database unreachable'), { code: 'ECONNREFUSED' })
  }
  return {
    client,
    set(mode) {
      for (const name of FAILING) {
        const original = own.get(name)
        if (mode === 'unreachable') Object.defineProperty(client, name, { value: fail, configurable: true, writable: true })
        else if (original) Object.defineProperty(client, name, original)
        else delete (client as unknown as Record<string, unknown>)[name]
      }
    },
  }
}
