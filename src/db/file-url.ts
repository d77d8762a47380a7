import { parseUri } from '@libsql/core/uri'

// Where a `file:` DATABASE_URL is on disk, read as libSQL's own client reads it (@libsql/core's
// parseUri): without a `//localhost` authority, its path percent-decoded. Derived by hand from the
// text after `file:`, `file://localhost/srv/svc.db` created `/localhost/srv` while libSQL opened
// `/srv/svc.db`, and `file:data/p%2Fq/x.db` a directory named `p%2Fq` (QA). The URL is checked
// before (src/config/database-url.ts), so it parses.

/** The local file path of a `file:` URL, or undefined for in-memory and remote URLs. */
export function localPathOf(url: string): string | undefined {
  const path = filePathOf(url)
  return path === '' || path === ':memory:' ? undefined : path
}

/**
 * True for a database that lives in this process's memory only (`:memory:`, `file::memory:`,
 * with or without `?cache=…`): gone when the process stops, and no other process sees it.
 * (libSQL refuses `file:…?mode=memory`: it takes no `mode` parameter.)
 */
export function isInMemoryUrl(url: string): boolean {
  return url === ':memory:' || filePathOf(url) === ':memory:'
}

/** The path of a `file:` URL ('' when it has none), or undefined for other URLs. */
function filePathOf(url: string): string | undefined {
  if (!url.startsWith('file:')) return undefined
  try {
    return parseUri(url).path
  } catch {
    // Not a URL libSQL reads: the config refuses it before any of this runs.
    return url.slice('file:'.length).split(/[?#]/)[0]!
  }
}
