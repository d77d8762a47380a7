/**
 * Polls `check` up to `tries` times, `intervalMs` apart, and returns its first non-undefined
 * value. For waiting on another process or socket, never for timing assertions.
 */
export async function poll<T>(what: string, tries: number, intervalMs: number, check: () => Promise<T | undefined> | T | undefined): Promise<T> {
  for (let attempt = 0; attempt < tries; attempt++) {
    const value = await check()
    if (value !== undefined) return value
    await Bun.sleep(intervalMs)
  }
  throw new Error(`timed out waiting for ${what}`)
}
