import { writeSync } from 'node:fs'
import type { LogLevel } from '../config/config'
import { CREDENTIAL, mayHoldCredential } from '../lib/credential-text'
import { closedAtStart } from '../lib/std-output'

/** Structured JSON-lines logger. Content (prompts, files, ciphertext) is never passed to it. */
export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void
  info(message: string, fields?: Record<string, unknown>): void
  warn(message: string, fields?: Record<string, unknown>): void
  error(message: string, fields?: Record<string, unknown>): void
}

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 }

// Any credential that reaches a log line by accident (an echoed header, an error message)
// is cut down to its prefix, on every path (CREDENTIAL).

/** Replaces every credential-looking substring with its prefix and a marker. */
export function redact(text: string): string {
  return text.replace(CREDENTIAL, '$1[redacted]')
}

/**
 * For text printed to a terminal or a boot log that echoes a value it refuses (config problems,
 * a CLI's error line): besides keys and tokens, a URL's user:password and its query and fragment
 * (any parameter may be a secret) are cut out. The user:password runs to the URL's last `@`: a
 * password may hold a `/` or a `'`, the very things that make such a URL refused (QA).
 */
export function redactCredentials(text: string): string {
  return redact(
    text
      .replace(/\/\/([^\s"]*)@/g, (url, userinfo: string) => (isUserinfo(userinfo) ? '//[redacted]@' : url))
      .replace(/(\b[a-z][a-z0-9+.-]*:\/\/[^\s"?#]*)([?#])(?!\[redacted\])[^\s"]*?(?=[:,;.)\]']*(?:[\s"]|$))/gi, '$1$2[redacted]'),
  )
}

/**
 * Whether what stands between `//` and a URL's last `@` is a user:password rather than a host and
 * a path holding `@` (`//registry.example/@scope/pkg`, `//host:8080/@team`): it has no `/`, or a
 * `:` before its first `/` followed by something other than a port.
 */
function isUserinfo(text: string): boolean {
  const slash = text.indexOf('/')
  if (slash === -1) return true
  const colon = text.indexOf(':')
  return colon !== -1 && colon < slash && !/^\d*$/.test(text.slice(colon + 1, slash))
}

/**
 * A URL an error message quotes (a config problem, a CLI's error), as written but for its query
 * and fragment (any parameter may be a secret). One holding an `@` (a user:password) is read by
 * the URL parser and shown without it: read as text, a `"` or a space in a password ended the cut
 * (QA); one the parser cannot read shows its scheme only.
 */
export function displayUrl(raw: string): string {
  // A file: path's `@` is never a user (QA: /var/lib/svc@prod was respelled as a URL).
  if (!raw.includes('@') || /^file:/i.test(raw)) {
    const start = raw.search(/[?#]/)
    return start === -1 ? raw : `${raw.slice(0, start + 1)}[redacted]`
  }
  const url = URL.parse(raw)
  if (url === null) {
    const scheme = /^[a-z][a-z0-9+.-]*:(?:\/\/)?/i.exec(raw)?.[0] ?? ''
    return `${scheme}[redacted]@`
  }
  const userinfo = url.username !== '' || url.password !== '' ? '[redacted]@' : ''
  const rest = url.search !== '' ? '?[redacted]' : url.hash !== '' ? '#[redacted]' : ''
  // The parser writes `/` for no path at all: shown as written.
  const path = url.pathname === '/' && !/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*\//i.test(raw) ? '' : url.pathname
  return `${url.protocol}//${userinfo}${url.host}${path}${rest}`
}

const bigintAsString = (_key: string, value: unknown) => (typeof value === 'bigint' ? value.toString() : value)

/**
 * A logger writing one JSON object per line at or above `level`. Every chat request logs a line,
 * so the common case is kept cheap: the fields are serialised as they are and appended to the
 * line's own members (no copy of the record; a field named like one of them comes last and wins,
 * as a copy would make it), JSON.stringify runs without a replacer callback unless a field holds
 * a bigint (then they become decimal strings), and the redaction regex runs only on a line that
 * contains a credential prefix at all. Hot callers pass amounts as strings.
 */
export function createLogger(level: LogLevel, write: (line: string) => void = stdoutBatched): Logger {
  const threshold = RANK[level]
  // Lines logged within one millisecond share their timestamp text.
  let lastMs = -1
  let lastTime = ''
  const emit = (lineLevel: LogLevel, message: string, fields?: Record<string, unknown>) => {
    if (RANK[lineLevel] < threshold) return
    const now = Date.now()
    if (now !== lastMs) {
      lastMs = now
      lastTime = new Date(now).toISOString()
    }
    let members = '}'
    if (fields !== undefined) {
      let text: string
      try {
        text = JSON.stringify(fields)
      } catch {
        text = JSON.stringify(fields, bigintAsString)
      }
      if (text.length > 2) members = `,${text.slice(1)}`
    }
    const json = `{"time":"${lastTime}","level":"${lineLevel}","msg":${JSON.stringify(message)}${members}`
    write(`${mayHoldCredential(json) ? redact(json) : json}\n`)
  }
  return {
    debug: (message, fields) => emit('debug', message, fields),
    info: (message, fields) => emit('info', message, fields),
    warn: (message, fields) => emit('warn', message, fields),
    error: (message, fields) => emit('error', message, fields),
  }
}

let pending: string[] = []
let exitHooked = false

// Lines are written at most FLUSH_MS after the first of a batch, or at once past FLUSH_LINES.
// The trade: a process killed hard (SIGKILL, a crash) loses at most the last FLUSH_MS of lines
// (once per event-loop turn it lost the current turn's).
const FLUSH_MS = 5
export const FLUSH_LINES = 256

let reportedFailure = false

/** Said once on standard error (which may fail too, silently), then the lines are dropped. */
function stdoutFailed(error: unknown): void {
  if (reportedFailure) return
  reportedFailure = true
  try {
    writeSync(2, `log lines could not be written to standard output (${String(error)}); they are dropped while it fails\n`)
  } catch {
    // Nowhere left to say it.
  }
}

function flushStdout(): void {
  if (pending.length === 0) return
  const text = pending.length === 1 ? pending[0]! : pending.join('')
  pending = []
  process.stdout.write(text)
}

/**
 * Standard output, written in batches: one write(2) per line cost ~1% of a chat request's CPU,
 * one per event-loop turn still ~1.4% under load (a turn often holds one request). Lines still
 * pending when the process exits are written by the exit hook.
 */
function stdoutBatched(line: string): void {
  if (!exitHooked) {
    exitHooked = true
    process.on('exit', flushStdout)
    // A failed write (a full disk, a log reader that exited) is an `error` event of the stream,
    // which unheard would end the process: logging is best effort, the lines are dropped.
    process.stdout.on('error', stdoutFailed)
    // Closed at start (`>&-`), Bun writes to a /dev/null of its own without an error: said too.
    if (closedAtStart(1)) stdoutFailed('it is closed')
  }
  if (pending.length === 0) setTimeout(flushStdout, FLUSH_MS)
  pending.push(line)
  if (pending.length >= FLUSH_LINES) flushStdout()
}

/** A logger that drops everything (tests, CLI). */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} }
