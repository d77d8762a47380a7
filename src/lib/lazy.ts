/**
 * A module (or anything else) loaded on first use and kept: `const sdk = lazy(() => import('./sdk'))`,
 * then `await sdk()` wherever it is needed. Keeps heavy dependencies that only rare routes use
 * out of the server's boot graph (bench/README.md, "Boot footprint"). The import must stay a
 * string literal inside the loader so `bun build --compile` still bundles the module.
 * A failed load is not cached: the next call tries again.
 */
export function lazy<T>(load: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined
  return () => {
    pending ??= load().catch(error => {
      pending = undefined
      throw error
    })
    return pending
  }
}
