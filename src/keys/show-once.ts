// A new key's secret is stored nowhere (only its hash): it is shown once, or the key is revoked.
import type { Output } from '../lib/std-output'

/** The key being shown, and what the error says if it has to be revoked. */
export interface UnseenKey {
  /** Names the key in the error: "the first boot's admin key". */
  what: string
  keyId: string
  revoke(): Promise<unknown>
  /** How to get another key: "Create one with: svc keys create …". */
  remedy: string
}

/**
 * Prints `lines` (which hold the secret) to standard output; from the first line it does not
 * take, to standard error. When neither takes them nobody saw the key: it is revoked, so no live
 * credential is left that no one knows, and the error says so with `key.remedy`. Resolves to
 * standard output's error when the lines went to standard error, else undefined.
 */
export async function showOnceOrRevoke(output: Output, lines: string[], key: UnseenKey): Promise<Error | undefined> {
  let outFailure: Error | undefined
  try {
    for (const line of lines) {
      if (outFailure === undefined) {
        try {
          output.out(line)
          continue
        } catch (error) {
          outFailure = asError(error)
        }
      }
      output.err(line)
    }
  } catch (error) {
    const causes = [outFailure, asError(error)].filter(cause => cause !== undefined).map(cause => cause.message)
    const failure = `could not print ${key.what} (${causes.join('; ')})`
    try {
      await key.revoke()
    } catch (revokeError) {
      throw new Error(`${failure}, nor revoke it (${asError(revokeError).message}); revoke it with: svc keys revoke ${key.keyId}`)
    }
    throw new Error(`${failure}; it was revoked. ${key.remedy}`)
  }
  return outFailure
}

const asError = (error: unknown) => (error instanceof Error ? error : new Error(String(error)))
