/**
 * The methods the app serves on each path, so a request with the wrong method on a known path is
 * answered 405 with `Allow` (RFC 9110 §15.5.6; OpenAI's API does the same), not 404 as for a
 * path that does not exist. Learnt from the built app's routes; compiled on the first miss, so
 * only a miss pays for it.
 */
export class RouteMethods {
  private routes: readonly Route[] = []
  private compiled: { pattern: RegExp; method: string; path: string }[] | undefined

  /**
   * A route documented as answering nothing but 405 (GET and DELETE /mcp: no server stream, no
   * sessions) refuses its method, so it is left out of `Allow`.
   */
  learn(routes: readonly Route[]): void {
    this.routes = routes.filter(route => Object.keys(route.hooks?.detail?.responses ?? {}).join() !== '405')
    this.compiled = undefined
  }

  /** The methods served on `path` (HEAD wherever GET is, as Bun answers it), empty for an unknown path. */
  allowed(path: string): string[] {
    const methods = new Set<string>()
    for (const route of this.matching(path)) methods.add(route.method)
    if (methods.has('GET')) methods.add('HEAD')
    return [...methods].sort()
  }

  /** The route pattern `path` matches (its metrics label and log line's `route`), if any. */
  patternOf(path: string): string | undefined {
    return this.matching(path)[0]?.path
  }

  private matching(path: string): { method: string; path: string }[] {
    this.compiled ??= this.routes.map(route => ({ method: route.method, path: route.path, pattern: patternOf(route.path) }))
    return this.compiled.filter(route => route.pattern.test(path))
  }
}

interface Route {
  method: string
  path: string
  hooks?: { detail?: { responses?: Record<string, unknown> } }
}

// Elysia's path syntax: `:name` is one segment, a trailing `*` the rest of the path.
function patternOf(path: string): RegExp {
  const source = path
    .split('/')
    .map(segment => (segment === '*' ? '.*' : segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/')
  // The router also serves a path with a trailing slash.
  return new RegExp(`^${source}/?$`)
}
