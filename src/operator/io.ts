import { parseArgs } from 'node:util'
import { displayUrl } from '../observability/logger'
import { ApiError } from '../http/errors'
import { showOnceOrRevoke, type UnseenKey } from '../keys/show-once'
import { idFromInput, UUID } from '../lib/ids'
import { formatUsd, MAX_NANOS, parseNanos, parseUsd } from '../lib/money'
import type { Output } from '../lib/std-output'

/** Where a CLI command writes (stdOutput: a write that fails throws); tests capture it. */
export type CliIo = Output

/** Bad command-line usage: exit code 2 with the message and the usage text. */
export class UsageError extends Error {}

/**
 * `--help` or `-h` given as a flag: the usage text, exit 0, and the command does nothing. As a
 * flag's value (`--note -h`, refused as ambiguous like any dash-led value) or after `--` it is
 * no help request.
 */
export class HelpRequested extends Error {}

/** `ledger verify` found violations: exit code 1 after they were already printed. */
export class LedgerViolation extends Error {
  constructor(count: number) {
    super(`${count} ledger invariant violation(s)`)
  }
}

type OptionSpec = Record<string, { type: 'string' | 'boolean' }>

/**
 * Strict option parsing: unknown flags, missing values, a flag given twice and stray positionals
 * are usage errors. `required` names flags that must be present. `--json` is a flag like any
 * other: a command that prints no JSON (login, logout) does not list it, so it is refused there.
 * `--help`/`-h` is every command's flag (HelpRequested), checked before what the others need.
 */
export function parseOptions<T extends OptionSpec>(
  args: string[],
  options: T,
  required: Array<keyof T & string> = [],
  /** The one positional argument's name (PROMPT, ORG…), when the command takes one. */
  positional?: string,
): { values: { [K in keyof T]?: T[K]['type'] extends 'boolean' ? boolean : string }; positionals: string[] } {
  let parsed
  try {
    parsed = parseArgs({ args: withNegativeValues(args, options), options: { ...options, help: { type: 'boolean', short: 'h' } }, strict: true, allowPositionals: positional !== undefined, tokens: true })
  } catch (error) {
    throw new UsageError((error as Error).message.replace(/^TypeError \[[A-Z_]+\]: /, ''))
  }
  if ((parsed.values as { help?: boolean }).help) throw new HelpRequested('help requested')
  // parseArgs keeps a repeated flag's last value: `credit --usd 1 --usd 1000` would book 1000 USD.
  const seen = new Set<string>()
  for (const token of parsed.tokens) {
    if (token.kind !== 'option') continue
    if (seen.has(token.name)) throw new UsageError(`--${token.name} was given more than once`)
    seen.add(token.name)
  }
  if (parsed.positionals.length !== (positional === undefined ? 0 : 1)) {
    if (positional === undefined) throw new UsageError(`unexpected argument "${parsed.positionals[0]}"`)
    throw new UsageError(`expected one argument, ${positional}, got ${parsed.positionals.length}${parsed.positionals.length > 1 ? ' (quote an argument that holds spaces)' : ''}`)
  }
  for (const name of required) {
    const value = (parsed.values as Record<string, unknown>)[name]
    if (value === undefined || value === '') throw new UsageError(`--${name} is required`)
  }
  return parsed as never
}

/**
 * `--port -1` as `--port=-1`: parseArgs calls a value starting with a dash "ambiguous" (it could
 * be a forgotten value followed by a flag), so a negative number never reached the flag's own
 * check and its message. No flag is a dash and a digit, so such a value is unambiguous here; a
 * value like `--admin` after `--name` stays the usage error it was.
 */
function withNegativeValues(args: string[], options: OptionSpec): string[] {
  const joined: string[] = []
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!
    const next = args[index + 1]
    // After `--` everything is a positional, as parseArgs reads it.
    if (arg === '--') return joined.concat(args.slice(index))
    if (arg.startsWith('--') && options[arg.slice(2)]?.type === 'string' && next !== undefined && /^-[0-9]/.test(next)) {
      joined.push(`${arg}=${next}`)
      index++
    } else {
      joined.push(arg)
    }
  }
  return joined
}

/**
 * The PROMPT argument of the chat commands: an empty or whitespace-only one is a usage error
 * here, not a request the gateway would answer (or bill) for nothing.
 */
export function promptArgument(positionals: string[]): string {
  const prompt = positionals[0] ?? ''
  if (prompt.trim() === '') throw new UsageError('PROMPT must not be empty or only whitespace')
  return prompt
}

/**
 * Runs checks the CLI shares with the API (key options, org and user fields) on flag values.
 * An `invalid_request` they raise about one of `flags`' fields (API field → CLI flag) is a usage
 * error (exit 2) that names the flag, not the JSON field the API would name. Other errors pass
 * through as failures. The checks are synchronous: they run before the database is opened, so a
 * usage error never depends on the database (see Command in src/commands.ts).
 */
export function checkFlags<T>(flags: Record<string, `--${string}`>, run: () => T): T {
  try {
    return run()
  } catch (error) {
    const flag = error instanceof ApiError && error.code === 'invalid_request' && error.param !== undefined ? flags[error.param] : undefined
    if (flag === undefined) throw error
    throw new UsageError(renameFields((error as ApiError).message, flags, flag))
  }
}

/** The message with API field names as flags: a leading field name, and snake_case ones anywhere. */
function renameFields(message: string, flags: Record<string, string>, flag: string): string {
  let renamed = message.replace(/^[a-z_]+\b/, word => flags[word] ?? word)
  for (const [field, name] of Object.entries(flags)) if (field.includes('_')) renamed = renamed.replace(new RegExp(`\\b${field}\\b`, 'g'), name)
  return renamed.includes(flag) ? renamed : `${flag}: ${renamed}`
}

/**
 * An amount flag in USD (`--usd 0.50`) or nanos (`--nanos 500000000`): a usage error naming the
 * flag when it is malformed, zero where a positive amount is needed, or more than the ledger holds.
 */
export function amountFlag(flag: `--${string}`, value: string, unit: 'usd' | 'nanos', options: { positive: boolean }): bigint {
  const amount = unit === 'usd' ? parseUsd(value) : parseNanos(value)
  if (amount === null && /^(0|[1-9][0-9]*)$/.test(unit === 'usd' ? value.replace(/\.[0-9]{1,9}$/, '') : value)) {
    throw new UsageError(`${flag} is more than the ledger can hold (at most ${unit === 'usd' ? `${formatUsd(MAX_NANOS)} USD` : `${MAX_NANOS} nanos`})`)
  }
  if (amount === null || (options.positive && amount === 0n)) {
    const kind = options.positive ? 'a positive' : 'a'
    throw new UsageError(unit === 'usd' ? `${flag} must be ${kind} decimal with at most 9 decimals, e.g. 25 or 0.50` : `${flag} must be ${kind} integer`)
  }
  return amount
}

/** Prints `data` as one JSON object with --json, else the human lines. */
export function report(io: CliIo, json: boolean | undefined, data: Record<string, unknown>, lines: string[]): void {
  for (const line of reportLines(json, data, lines)) io.out(line)
}

function reportLines(json: boolean | undefined, data: Record<string, unknown>, lines: string[]): string[] {
  return json ? [JSON.stringify(data, (_key, value) => (typeof value === 'bigint' ? value.toString() : value))] : lines
}

/**
 * `report` for output that holds a new key's secret, shown only this once (showOnceOrRevoke): on
 * standard error when standard output does not take it, and the key is revoked when neither
 * does. Resolves to the error to exit 1 with when it went to standard error (the key stays
 * active: it was shown), else undefined.
 */
export async function reportKey(io: CliIo, json: boolean | undefined, data: Record<string, unknown>, lines: string[], key: UnseenKey): Promise<Error | undefined> {
  const outFailure = await showOnceOrRevoke(io, reportLines(json, data, lines), key)
  return outFailure && new Error(`${outFailure.message}; ${key.what} was printed on standard error instead, and is active`, { cause: outFailure })
}

/**
 * The gateway base URL of a client command: --url, else `fallback` (SVC_URL or its default, or the
 * URL `svc login` stored), without trailing slashes. Anything but an http(s) URL is a usage error
 * naming where it came from, rather than a fetch failure that looks like an unreachable gateway.
 */
export function gatewayUrl(flag: string | undefined, fallback: string, fallbackName = 'SVC_URL'): string {
  const [value, name] = flag !== undefined ? [flag, '--url'] : [fallback, fallbackName]
  const parsed = URL.parse(value)
  if (parsed === null || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
    throw new UsageError(`${name} must be an http(s) URL such as http://localhost:8080, got "${displayUrl(value)}"`)
  }
  return value.replace(/\/+$/, '')
}

/**
 * An id argument (`--org`, `--user`, KEY_ID…) as stored (idFromInput); one that is no UUID is a
 * usage error naming it (exit 2), as the API's 400, not a lookup that finds nothing (exit 1).
 */
export function idArgument(text: string, name: string): string {
  const id = idFromInput(text)
  if (!UUID.test(id)) throw new UsageError(`${name} must be a UUID, got "${text.slice(0, 80)}"`)
  return id
}
