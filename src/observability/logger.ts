import type { LogLevel } from '../config/config'

/** Structured JSON-lines logger. Content (prompts, files, ciphertext) is never passed to it. */
export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void
  info(message: string, fields?: Record<string, unknown>): void
  warn(message: string, fields?: Record<string, unknown>): void
  error(message: string, fields?: Record<string, unknown>): void
}

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 }

// Any credential that reaches a log line by accident (an echoed header, an error message)
// is cut down to its prefix, on every path.
const SECRET = /\b(z_sk_|svc_cli_|svc_mcp_)[A-Za-z0-9_-]+/g

/** Replaces every credential-looking substring with its prefix and a marker. */
export function redact(text: string): string {
  return text.replace(SECRET, '$1[redacted]')
}

/** A logger writing one JSON object per line at or above `level`. */
export function createLogger(level: LogLevel, write: (line: string) => void = line => process.stdout.write(line)): Logger {
  const threshold = RANK[level]
  const emit = (lineLevel: LogLevel, message: string, fields?: Record<string, unknown>) => {
    if (RANK[lineLevel] < threshold) return
    write(`${redactIfNeeded(jsonLine(lineLevel, message, fields))}\n`)
  }
  return {
    debug: (message, fields) => emit('debug', message, fields),
    info: (message, fields) => emit('info', message, fields),
    warn: (message, fields) => emit('warn', message, fields),
    error: (message, fields) => emit('error', message, fields),
  }
}

/**
 * The JSON text of one line. One line per request is on the hot path: a JSON.stringify replacer
 * (for bigints) cost ~7× a plain stringify, so top-level bigints are converted first and the
 * replacer is only the fallback for nested ones.
 */
function jsonLine(level: LogLevel, message: string, fields: Record<string, unknown> | undefined): string {
  const record: Record<string, unknown> = { time: new Date().toISOString(), level, msg: message, ...fields }
  if (fields !== undefined) for (const key in fields) if (typeof fields[key] === 'bigint') record[key] = String(fields[key])
  try {
    return JSON.stringify(record)
  } catch {
    return JSON.stringify(record, (_key, value) => (typeof value === 'bigint' ? value.toString() : value))
  }
}

/** The regex only runs on lines that could hold a credential (most lines cannot). */
function redactIfNeeded(line: string): string {
  return line.includes('_sk_') || line.includes('svc_cli_') || line.includes('svc_mcp_') ? redact(line) : line
}

/** A logger that drops everything (tests, CLI). */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} }
