// The svc command line (src/cli.ts runs it): usage, and each command's dispatch.
import { existsSync } from 'node:fs'
import { DrizzleQueryError } from 'drizzle-orm/errors'
import { isInMemoryUrl, localPathOf } from './db/file-url'
import { loadClientConfig, type ClientConfig } from './config/client'
import type { Config } from './config/config'
import { ConfigError, loadConfig } from './config/load'
import { DatabaseFileError, migrateDatabase, type Database } from './db/client'
import { createDeps, openConfiguredDatabase, type Deps } from './deps'
import { ApiError } from './http/errors'
import { stdOutput } from './lib/std-output'
import { serve } from './main'
import { createLogger, displayUrl, redactCredentials } from './observability/logger'
import { HelpRequested, LedgerViolation, UsageError, type CliIo } from './operator/io'
import packageJson from '../package.json'

const USAGE = `svc — self-hostable LLM inference gateway

Usage: svc [command] [options]

  help, --help, -h              print this text (also after a command: svc credit --help)
  version, --version            print the gateway's version and exit
  serve                         apply migrations, bootstrap an empty database, listen on PORT (default)
  migrate                       apply pending migrations and exit
  orgs create --name N [--owner EMAIL] [--plan P] [--credit-usd X]
                                create an organization, its owner and an admin key (printed once)
  orgs show ORG                 plan, balance and allowance left
  credit --org ORG (--usd X | --nanos N) [--note TEXT] [--reference REF]
                                book a prepaid top-up (a repeated --reference is applied once)
  plans set --org ORG --plan P  switch plan (an upgrade raises this month's allowance; running gateways draw on it within 1 s)
  ledger verify                 check every ledger invariant; exit 1 naming each violation
  chat --model M [--key K] [--url U] [--system S] PROMPT
                                stream one answer through a running gateway (SVC_API_KEY, SVC_URL,
                                else the token of svc login)
  fusion --models A,B[,C] [--judge J] [--system S] [--web-search] [--web-fetch] [--request-id UUID]
         [--key K] [--url U] PROMPT
                                two or three models answer, a judge synthesizes: the synthesis on
                                stdout, each participant's status on stderr (key as for chat)
  login [--url U]               sign in to a gateway in the browser (OAuth device flow); keeps a
                                CLI token in SVC_CONFIG_DIR (default $XDG_CONFIG_HOME/svc, else
                                ~/.config/svc), mode 0600
  logout                        revoke and delete the stored token
  encrypted-chat --model M:encrypted [--key K] [--url U] [--algo ecdsa|ed25519] [--no-stream] [--system S] PROMPT
                                one end-to-end encrypted answer: attest, check the binding, encrypt, decrypt
  dev-tee [--port N] [--family nearai|phala] [--version 1|2] [--faults a,b] [--reasoning]
                                run the simulated TEE backend; prints its URL, token and a complete config (SVC_CONFIG)
  users add --org ORG --email E --role owner|admin|member
  users set-role --org ORG --user USER_ID --role owner|admin|member
  keys create --org ORG --user USER_ID --name N [--admin] [--expires-in X]
              [--spend-cap-period daily|monthly|overall --spend-cap-nanos N]
  keys list --org ORG
  keys revoke KEY_ID

--json prints one JSON object instead of text, on orgs, users, keys, credit, plans set, ledger verify, chat, fusion,
encrypted-chat and dev-tee; serve, migrate and version take no arguments. Exit codes: 0 success, 1 failure, 2 usage error.
Environment: PORT, DATABASE_URL, DATABASE_AUTH_TOKEN, DATABASE_TIMEOUT_S, SVC_CONFIG, SVC_LOG_LEVEL, SVC_BOOTSTRAP, SVC_INSTANCE_ID;
without SVC_CONFIG, OPENAI_API_KEY, ANTHROPIC_API_KEY and OLLAMA_BASE_URL each add that provider to the embedded default.
chat, fusion, login, logout and encrypted-chat only talk to a running gateway: they read SVC_URL (default
http://localhost:$PORT), SVC_API_KEY and SVC_CONFIG_DIR, never SVC_CONFIG or the database; dev-tee reads only its flags.`

/**
 * A database command reads and checks its arguments first: a usage error or --help needs neither
 * the configuration nor the database (nor migrates it). Then what depends on the configuration
 * (a plan's name), still before the database is opened; then it runs on the database. So a usage
 * error never depends on the database (one that does not exist, or is not the gateway's).
 */
type Command = (args: string[], io: CliIo) => (config: Config) => (deps: Deps) => Promise<void>

// Operator commands are imported when run, so `svc serve` does not load them (nor the client,
// TEE and OAuth-login code they pull in). The specifiers stay string literals: `bun build
// --compile` bundles what it can see.
const COMMANDS: Record<string, () => Promise<Command>> = {
  'orgs create': async () => (await import('./operator/orgs')).orgsCreate,
  'orgs show': async () => (await import('./operator/orgs')).orgsShow,
  credit: async () => (await import('./operator/billing')).credit,
  'plans set': async () => (await import('./operator/billing')).plansSet,
  'ledger verify': async () => (await import('./operator/billing')).ledgerVerify,
  'users add': async () => (await import('./operator/users')).usersAdd,
  'users set-role': async () => (await import('./operator/users')).usersSetRole,
  'keys create': async () => (await import('./operator/keys')).keysCreate,
  'keys list': async () => (await import('./operator/keys')).keysList,
  'keys revoke': async () => (await import('./operator/keys')).keysRevoke,
}

type ClientCommand = (client: ClientConfig, args: string[], io: CliIo) => Promise<void>

/**
 * Commands that only talk to a running gateway over HTTP. They read SVC_URL, SVC_API_KEY and the
 * login token's directory (loadClientConfig), never the server's config: a workstation has
 * neither its file nor the provider secrets it names.
 */
const CLIENT_COMMANDS: Record<string, () => Promise<ClientCommand>> = {
  chat: async () => (await import('./operator/chat')).chat,
  fusion: async () => (await import('./operator/fusion')).fusion,
  login: async () => (await import('./operator/login')).login,
  logout: async () => (await import('./operator/login')).logout,
  'encrypted-chat': async () => (await import('./operator/encrypted-chat')).encryptedChatCommand,
}

/** Commands runCli dispatches itself (the rest are COMMANDS). */
const DIRECT_COMMANDS = new Set([...Object.keys(CLIENT_COMMANDS), 'dev-tee'])

/** Commands that take no arguments at all (not even --json: they print no data, or only a version). */
const NO_ARGUMENTS = new Set(['serve', 'migrate', 'version', '--version'])

/** The help flags: alone, or after a command group (`svc keys -h`) or a command that takes no arguments. */
const HELP = new Set(['--help', '-h'])

/** Runs one CLI invocation; resolves to the process exit code (serve keeps running). */
export async function runCli(argv: string[], env: Record<string, string | undefined> = process.env, io: CliIo = stdOutput): Promise<number> {
  const [first = 'serve', second] = argv
  // Past the command, help is a flag the command reads (parseOptions): never a flag's value or
  // what follows `--` (`credit --note -h` must not end as a success that booked nothing).
  if (first === 'help' || HELP.has(first)) return printUsage(io)
  const onlyHelp = argv.length === 2 && HELP.has(second!)
  // These take no arguments: one given is named as such, not read as an unknown command.
  if (NO_ARGUMENTS.has(first) && argv.length > 1) {
    if (onlyHelp) return printUsage(io)
    say(io, `usage error: ${first} takes no arguments, got "${argv[1]}"\n\n${USAGE}`)
    return 2
  }
  if (first === 'version' || first === '--version') return exitCode(io, async () => io.out(packageJson.version))
  const pair = `${first} ${second ?? ''}`.trim()
  // One-word commands (credit) take their options from the second word on.
  // Own keys only: `toString` or `constructor` is no command.
  const single = Object.hasOwn(COMMANDS, first) ? COMMANDS[first] : undefined
  const named = single ? undefined : await subcommandOf(argv, io)
  const command = single ?? named?.command
  const rest = single ? argv.slice(1) : (named?.rest ?? [])
  // A mistyped command is a usage error (2) whatever the configuration's state.
  const direct = first === 'serve' || first === 'migrate' || DIRECT_COMMANDS.has(first)
  if (!command && !direct) {
    // A command group (`svc ledger`, `svc keys list-all`) names its subcommands, not "unknown".
    const group = Object.keys(COMMANDS).filter(name => name.startsWith(`${first} `))
    // Right after the group's name a help flag cannot be a flag's value: `svc keys -h`.
    if (group.length > 0 && HELP.has(second!)) return printUsage(io)
    const problem = group.length === 0 ? `unknown command "${argv.join(' ')}"`
      : second === undefined || second.startsWith('-') ? `${first} needs a subcommand: ${group.join(', ')}`
      : `unknown command "${pair}": ${first} takes ${group.join(', ')}`
    say(io, `usage error: ${problem}\n\n${USAGE}`)
    return 2
  }
  const clientCommand = Object.hasOwn(CLIENT_COMMANDS, first) ? CLIENT_COMMANDS[first] : undefined
  if (clientCommand) {
    const client = configOrExit(() => loadClientConfig(env), io)
    if (client === undefined) return 1
    return exitCode(io, async () => (await clientCommand())(client, argv.slice(1), io))
  }
  // dev-tee takes everything from its own flags.
  if (first === 'dev-tee') {
    const stop = new AbortController()
    const onSignal = () => stop.abort()
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, onSignal)
    try {
      return await exitCode(io, async () => (await import('./operator/dev-tee')).devTee(argv.slice(1), io, stop.signal))
    } finally {
      for (const signal of ['SIGINT', 'SIGTERM'] as const) process.off(signal, onSignal)
    }
  }
  // A database command reads its arguments before the configuration and the database (Command).
  let parsed: ((config: Config) => (deps: Deps) => Promise<void>) | undefined
  if (command) {
    const code = await exitCode(io, async () => {
      parsed = (await command())(rest, io)
    })
    if (parsed === undefined) return code
  }
  const config = configOrExit(() => loadConfig(env), io)
  if (config === undefined) return 1
  let run = async (_deps: Deps) => {}
  if (parsed) {
    const checked = parsed
    let configured: ((deps: Deps) => Promise<void>) | undefined
    const code = await exitCode(io, async () => {
      configured = checked(config)
    }, config)
    if (configured === undefined) return code
    run = configured
  }
  // serve resolves once listening; a failure before that (an unreachable database) exits 1.
  if (first === 'serve') return exitCode(io, () => serve(config), config)
  return withDeps(config, io, run, { create: first === 'migrate' })
}

/**
 * The two-word command argv names, and the arguments it reads: `orgs create --name N` as usual;
 * with a help flag before `--`, the subcommand may also come after it (`svc orgs --help create`).
 * That command's parser reads the help flag with the other arguments, so it is help only as a
 * flag, not as a flag's value (`svc orgs --name -h create` stays a usage error). A subcommand's
 * name may itself be a flag's value (`svc orgs --name show create --help`): each word naming one
 * is tried in order, and the first whose parser takes the other arguments is the command (parsing
 * is free of effects: Command); when none does, the first, whose usage error is then reported.
 */
async function subcommandOf(argv: string[], io: CliIo): Promise<{ command: () => Promise<Command>; rest: string[] } | undefined> {
  const [first, second] = argv
  const pair = `${first} ${second ?? ''}`.trim()
  if (Object.hasOwn(COMMANDS, pair)) return { command: COMMANDS[pair]!, rest: argv.slice(2) }
  const end = argv.indexOf('--') === -1 ? argv.length : argv.indexOf('--')
  const options = argv.slice(1, end)
  if (!options.some(arg => HELP.has(arg))) return undefined
  const candidates = options.flatMap((arg, index) =>
    Object.hasOwn(COMMANDS, `${first} ${arg}`) ? [{ command: COMMANDS[`${first} ${arg}`]!, rest: argv.slice(1).toSpliced(index, 1) }] : [],
  )
  for (const candidate of candidates) {
    try {
      ;(await candidate.command())(candidate.rest, io)
      return candidate
    } catch (error) {
      if (!(error instanceof UsageError)) return candidate
    }
  }
  return candidates[0]
}

/** The loaded settings, or undefined after printing every problem of a ConfigError. */
function configOrExit<T>(load: () => T, io: CliIo): T | undefined {
  try {
    return load()
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error
    say(io, error.message)
    return undefined
  }
}

/**
 * Opens the database (applying pending migrations), runs `fn`, closes; maps errors to exit codes.
 * Only `create` (migrate; serve opens its own) may create a local database file or the gateway's
 * schema. Any other command on a file that does not exist (a mistyped DATABASE_URL, the default
 * relative path run from another directory), or on a database without the gateway's schema (an
 * empty file, another application's database), is refused before anything is written: it would
 * otherwise report on a new, empty database (`ledger verify`: "every invariant holds"), or write
 * where no server reads. An in-memory DATABASE_URL is refused for every command here, migrate
 * too, for the same reason.
 */
async function withDeps(config: Config, io: CliIo, fn: (deps: Deps) => Promise<void>, options: { create?: boolean } = {}): Promise<number> {
  let database: Database | undefined
  let deps: Deps | undefined
  try {
    return await exitCode(
      io,
      async () => {
        // Its own process's memory: the server's data is not there, and what is written is lost.
        if (isInMemoryUrl(config.databaseUrl)) {
          throw new Error("DATABASE_URL names an in-memory database; operator commands need the server's database file or URL")
        }
        const path = localPathOf(config.databaseUrl)
        if (!options.create && path !== undefined && !existsSync(path)) {
          throw new DatabaseFileError(`${path} does not exist (svc migrate or svc serve creates it)`)
        }
        database = await openConfiguredDatabase(config, { requireSchema: !options.create })
        deps = await createDeps(config, { database, logger: createLogger('warn', line => process.stderr.write(line)) })
        await migrateDatabase(deps.database)
        await fn(deps)
      },
      config,
    )
  } finally {
    if (deps) await deps.close()
    else database?.close()
  }
}

/** Runs a command and maps its outcome to an exit code: 0, 1 (failure) or 2 (usage). */
async function exitCode(io: CliIo, fn: () => Promise<void>, config?: Config): Promise<number> {
  try {
    await fn()
    return 0
  } catch (error) {
    if (error instanceof LedgerViolation) return 1
    if (error instanceof HelpRequested) return printUsage(io)
    if (error instanceof UsageError) {
      say(io, `usage error: ${redactCredentials(error.message)}\n\n${USAGE}`)
      return 2
    }
    say(io, `error: ${failureLine(error, config)}`)
    return 1
  }
}

/** The usage text on standard output: exit 0, or 1 when standard output does not take it. */
function printUsage(io: CliIo): Promise<number> {
  return exitCode(io, async () => io.out(USAGE))
}

/** A message on standard error; when that fails too, the exit code is all that is left to say it. */
function say(io: CliIo, line: string): void {
  try {
    io.err(line)
  } catch {
    // Nowhere left to say it.
  }
}

/** Failures of the network under a database client (Bun's fetch, sockets, DNS). */
const UNREACHABLE = /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ConnectionRefused|Unable to connect|fetch failed/i

/** An error's own text, with its code when the message does not say it. */
function textOf(error: unknown): string {
  // libSQL's batch errors open with their code twice ("SQLITE_BUSY: SQLITE_BUSY: database is locked").
  const message = (error instanceof Error ? error.message : String(error)).replace(/^([A-Z][A-Z0-9_]*): \1: /, '$1: ')
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' && !message.includes(code) ? `${code}: ${message}` : message
}

/** The errors' texts joined, each once: many messages already quote their cause's (libSQL's repeats its code). */
function causeText(chain: unknown[]): string {
  return chain.map(textOf).reduce((text: string, next) => (text === '' || next.includes(text) ? next : text.includes(next) ? text : `${text}: ${next}`), '')
}

/**
 * One line for a failed command, naming its cause. A failed query is described by what made it
 * fail, not by drizzle's "Failed query: <SQL>" (whose cause the message leaves out). Neither the
 * DATABASE_AUTH_TOKEN, credentials in a URL, nor an API key or token are ever printed.
 */
export function failureLine(error: unknown, config?: Config): string {
  const chain: unknown[] = []
  for (let link = error; link !== undefined && link !== null && chain.length < 10; link = (link as { cause?: unknown }).cause) chain.push(link)
  let line: string
  if (error instanceof ApiError) {
    line = error.message
  } else if (error instanceof DatabaseFileError) {
    line = `cannot open the database${config ? ` at ${displayUrl(config.databaseUrl)} (DATABASE_URL)` : ''}: ${error.message}`
  } else if (chain.some(link => link instanceof DrizzleQueryError)) {
    const detail = causeText(chain.filter(link => !(link instanceof DrizzleQueryError))) || 'a query failed'
    const where = config ? ` at ${displayUrl(config.databaseUrl)}` : ''
    line = UNREACHABLE.test(detail) ? `cannot reach the database${where}: ${detail}` : `database error${where}: ${detail}`
  } else {
    line = causeText(chain)
    // A ledger write the database refused (locked by another process, read-only): say which database.
    if (config && /SQLITE_|database is locked|readonly database/i.test(line)) line = `database error at ${displayUrl(config.databaseUrl)}: ${line}`
  }
  line = line.replace(/\s+/g, ' ').trim()
  if (config?.databaseUrl) line = line.replaceAll(config.databaseUrl, displayUrl(config.databaseUrl))
  if (config?.databaseAuthToken) line = line.replaceAll(config.databaseAuthToken, '[redacted]')
  // Nor a URL's password (SVC_URL behind a basic-auth proxy) or a key the failure quotes.
  return redactCredentials(line)
}
