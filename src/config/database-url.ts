// DATABASE_URL, checked at load as libSQL's client reads it when the database is opened: a value
// it refuses there stopped the process with a bare libSQL error naming no field (QA: "error:
// URL_INVALID: URL fragments are not supported"), where README promises a message naming it.
import { LibsqlError } from '@libsql/core/api'
import { expandConfig, type ExpandedConfig } from '@libsql/core/config'
import { displayUrl } from '../observability/logger'

/** What is wrong with `url` as DATABASE_URL, as a problem naming it; undefined when it is fine. */
export function databaseUrlProblem(url: string): string | undefined {
  // Quoted without its query or fragment (an authToken), as every problem quotes a URL.
  const got = `got "${displayUrl(url)}"`
  if (!/^(file:|libsql:\/\/|https?:\/\/|:memory:$)/.test(url)) return `DATABASE_URL: must start with file:, libsql://, http:// or https://, ${got}`
  // SQLite opens an empty path as a private temporary database, deleted on close: a server would
  // bootstrap a fresh organization at every start (`file:${DB}` with DB unset, say).
  if (/^file:([?#]|$)/.test(url)) return 'DATABASE_URL: file: names no file; give its path, e.g. file:data/svc.db'
  // Else libSQL's HTTP client refuses it as a bare "ERR_INVALID_URL: Invalid URL" (QA).
  if (!url.startsWith('file:') && url !== ':memory:' && !namesHost(url)) {
    return `DATABASE_URL: must be a valid URL naming the server, e.g. libsql://db.example.turso.io, ${got}`
  }
  const refusal = libsqlRefusal(url)
  return refusal === undefined ? undefined : `DATABASE_URL: ${refusal}, ${got}`
}

/** Whether `url` parses as a URL with a host (`libsql://` alone, or `libsql://[::1`, does not). */
function namesHost(url: string): boolean {
  try {
    return new URL(url).hostname !== ''
  } catch {
    return false
  }
}

/**
 * Why libSQL's client would refuse `url`, else undefined: the parse its createClient runs
 * (@libsql/core's expandConfig: the query parameters, the fragment, the percent-encoding, a
 * libsql: ?tls=0 with no port), then what its HTTP and local clients check of the result. Its
 * own messages quote a fragment or a query key, either of which may hold a secret: those are
 * said without them.
 */
function libsqlRefusal(url: string): string | undefined {
  let config: ExpandedConfig
  try {
    config = expandConfig({ url }, true)
  } catch (error) {
    if (!(error instanceof LibsqlError)) throw error
    // LibsqlError prefixes its code ("URL_INVALID: ...").
    const message = error.message.replace(`${error.code}: `, '')
    if (error.code === 'URL_PARAM_NOT_SUPPORTED') return 'the only query parameters libSQL takes are authToken and tls (cache for :memory:)'
    if (message.startsWith('URL fragments')) return 'libSQL takes no #fragment'
    if (message.includes('percent encoding')) return 'malformed percent-encoding (a % must start %XX, bytes of UTF-8)'
    return message
  }
  const { scheme, tls, authority } = config
  if (scheme === 'http' && tls) return 'an http: URL cannot opt into TLS with ?tls=1 (use https:)'
  if (scheme === 'https' && !tls) return 'an https: URL cannot opt out of TLS with ?tls=0 (use http:)'
  const host = authority?.host.toLowerCase()
  if (scheme === 'file' && authority !== undefined && ((host !== '' && host !== 'localhost') || authority.port !== undefined || authority.userinfo !== undefined)) {
    return 'a file: URL names no host; an absolute path starts with one slash or three (file:/srv/svc.db, file:///srv/svc.db)'
  }
  return undefined
}
