import { lookup } from 'node:dns/promises'

/**
 * The DNS seam (SECURITY-NOTES.md §6.1): every address a name resolves to. Tests script it
 * (public-looking names mapped to test servers, mixed answers, rebinding); production uses the
 * system resolver. Errors are values: `not-found` (the name has no addresses) is the caller's
 * problem, `failed` (timeouts, SERVFAIL) is a dependency outage.
 */
export interface Resolver {
  resolve(host: string, signal: AbortSignal): Promise<ResolveResult>
}

export type ResolveResult = { ok: true; addresses: string[] } | { ok: false; reason: 'not-found' | 'failed'; message: string }

const NOT_FOUND = new Set(['ENOTFOUND', 'ENODATA', 'EAI_NONAME', 'EAI_NODATA'])

/** getaddrinfo through node:dns (honours /etc/hosts and the system's resolver configuration). */
export class SystemResolver implements Resolver {
  async resolve(host: string, signal: AbortSignal): Promise<ResolveResult> {
    if (signal.aborted) return { ok: false, reason: 'failed', message: 'DNS lookup aborted' }
    // getaddrinfo cannot be cancelled: race it against the caller's deadline instead.
    let onAbort: (() => void) | undefined
    const aborted = new Promise<ResolveResult>(resolve => {
      onAbort = () => resolve({ ok: false, reason: 'failed', message: `DNS lookup of ${host} timed out` })
      signal.addEventListener('abort', onAbort, { once: true })
    })
    const looked = lookup(host, { all: true, verbatim: true }).then(
      (answers): ResolveResult => answers.length === 0
        ? { ok: false, reason: 'not-found', message: `${host} has no addresses` }
        : { ok: true, addresses: answers.map(answer => answer.address) },
      (error: NodeJS.ErrnoException): ResolveResult => NOT_FOUND.has(error.code ?? '')
        ? { ok: false, reason: 'not-found', message: `${host} does not resolve` }
        : { ok: false, reason: 'failed', message: `DNS lookup of ${host} failed (${error.code ?? 'error'})` },
    )
    try {
      return await Promise.race([looked, aborted])
    } finally {
      signal.removeEventListener('abort', onAbort!)
    }
  }
}
