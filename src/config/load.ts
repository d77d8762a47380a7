import { Value } from '@sinclair/typebox/value'
import { nameTextProblem } from '../lib/characters'
import { isEmail } from '../lib/email'
import { FAULT_POINTS, type FaultPoint } from '../lib/fault-point'
import { redactCredentials } from '../observability/logger'
import { parseUsd } from '../lib/money'
import type { BucketRule, Config, DocumentsConfig, LogLevel, Plan } from './config'
import { databaseUrlProblem } from './database-url'
import defaultYaml from './default.yaml' with { type: 'text' }
import { withEnvProviders } from './env-providers'
import { buildModels } from './models'
import { buildProviders } from './providers'
import { buildWeb } from './web'
import { FileConfigSchema, type FileConfig } from './schema'
import { Catalog } from '../catalog/catalog'
import { HEARTBEAT_MS, MIN_STALE_AFTER_MS } from '../billing/sweeper'
import { ApiError } from '../http/errors'
import { explainUnion, problemOf } from '../http/validation-message'
import { duplicateKey } from './duplicate-keys'

/** Boot-time configuration failure; `problems` names every bad field. */
export class ConfigError extends Error {
  readonly problems: string[]

  constructor(problems: string[]) {
    // A problem echoes the value it refuses, and goes to stderr (a boot log).
    const scrubbed = problems.map(redactCredentials)
    super(`invalid configuration:\n  - ${scrubbed.join('\n  - ')}`)
    this.problems = scrubbed
  }
}

type Env = Record<string, string | undefined>
const LOG_LEVELS: LogLevel[] = ['debug', 'info', 'warn', 'error']

/**
 * The only place that reads the environment (with client.ts, for the CLI's client commands). Parses env and the YAML/JSON file named by
 * SVC_CONFIG (else the embedded default) into a frozen Config, or throws ConfigError
 * listing every problem by name.
 */
export function loadConfig(env: Env = process.env, readText: (path: string) => string = readFileText): Config {
  const problems: string[] = []
  const port = parsePort(env.PORT, problems)
  // An empty variable means unset, for every setting (as `PORT=` and `DATABASE_URL=` always did):
  // what an env file or a compose entry with no value gives.
  const logLevel = (env.SVC_LOG_LEVEL || 'info') as LogLevel
  if (!LOG_LEVELS.includes(logLevel)) problems.push(`SVC_LOG_LEVEL: must be one of ${LOG_LEVELS.join(', ')}, got "${env.SVC_LOG_LEVEL}"`)
  const bootstrapFlag = env.SVC_BOOTSTRAP || '1'
  if (bootstrapFlag !== '0' && bootstrapFlag !== '1') problems.push(`SVC_BOOTSTRAP: must be 0 or 1, got "${bootstrapFlag}"`)
  const databaseUrl = env.DATABASE_URL || 'file:data/svc.db'
  const databaseUrlRefusal = databaseUrlProblem(databaseUrl)
  if (databaseUrlRefusal !== undefined) problems.push(databaseUrlRefusal)
  const databaseTimeoutS = env.DATABASE_TIMEOUT_S ? Number(env.DATABASE_TIMEOUT_S) : 10
  if (!/^[0-9]+(\.[0-9]+)?$/.test(env.DATABASE_TIMEOUT_S || '10') || !(databaseTimeoutS >= 0.1 && databaseTimeoutS <= 3600)) {
    problems.push(`DATABASE_TIMEOUT_S: must be a number of seconds from 0.1 to 3600, got "${env.DATABASE_TIMEOUT_S}"`)
  }

  if (env.SVC_INSTANCE_ID !== undefined && env.SVC_INSTANCE_ID !== '' && !/^[A-Za-z0-9._-]{1,64}$/.test(env.SVC_INSTANCE_ID)) {
    problems.push(`SVC_INSTANCE_ID: must be 1 to 64 letters, digits, dots, dashes or underscores, got "${env.SVC_INSTANCE_ID}"`)
  }
  const faultPoint = env.SVC_FAULT_POINT || undefined
  if (faultPoint !== undefined && !(FAULT_POINTS as readonly string[]).includes(faultPoint)) {
    problems.push(`SVC_FAULT_POINT: must be one of ${FAULT_POINTS.join(', ')}, got "${faultPoint}"`)
  }
  const source = env.SVC_CONFIG ? env.SVC_CONFIG : 'embedded default'
  let file = parseFile(env.SVC_CONFIG ? readConfigFile(env.SVC_CONFIG, readText, problems) : defaultYaml, source, problems)
  // Only the embedded default grows from OPENAI_API_KEY, ANTHROPIC_API_KEY and OLLAMA_BASE_URL.
  if (file && !env.SVC_CONFIG) file = withEnvProviders(file, name => env[name], problems)
  if (problems.length > 0 || !file) throw new ConfigError(problems)

  // Keys are read from the variables the file names, here, so nothing else touches the env.
  const providers = buildProviders(file.providers ?? [], name => env[name], problems)
  const models = buildModels(file.models ?? [], providers, problems)
  // The default judge must name a configured model, at a level it offers and that may judge:
  // else every Fusion request that names no judge would be refused as if the client erred.
  const judge = file.fusion?.judge
  if (judge !== undefined && !models.some(model => model.id === judge.split(':')[0])) {
    problems.push(`fusion.judge: "${judge}" is not a configured model (known: ${models.map(model => model.id).join(', ') || 'none'})`)
  } else if (judge !== undefined && problems.length === 0) {
    try {
      // The same resolution (and wording) a request's `judge` gets (fusion/privacy.ts).
      if (new Catalog({ models }).resolve(judge).level === 'encrypted') {
        problems.push(`fusion.judge: "${judge}" is Encrypted: the judge must read the answers it synthesises`)
      }
    } catch (error) {
      if (!(error instanceof ApiError)) throw error
      problems.push(`fusion.judge: ${error.message}`)
    }
  }
  const { web, prices } = buildWeb(file, name => env[name], problems)
  // From here every check reads the file's checked shape alone: the problems are gathered, and
  // reported together at the end, so a file is fixed in one pass, not one stage at a time.

  const plans = new Map<string, Plan>()
  for (const [id, plan] of Object.entries(file.plans)) {
    // The schema already checked the decimal shape; parseUsd also bounds it to int64.
    const allowance = parseUsd(plan.monthly_allowance)
    if (allowance === null) problems.push(`plans.${id}.monthly_allowance: amount too large`)
    plans.set(id, Object.freeze({ id, monthlyAllowanceNanos: allowance ?? 0n, fusion: plan.fusion }))
  }
  const bootstrapCredit = parseUsd(file.ledger?.bootstrap_credit ?? '5')
  if (bootstrapCredit === null) problems.push('ledger.bootstrap_credit: amount too large')
  const parsePrice = parseUsd(file.documents?.price_per_parse ?? '0.001')
  if (parsePrice === null) problems.push('documents.price_per_parse: amount too large')
  // The buckets count in millionths of a token per second: a finer rate would be rounded, silently.
  for (const surface of ['inference', 'management'] as const) {
    for (const scope of ['key', 'org'] as const) {
      const rate = file.limits?.[surface]?.[scope]?.per_second
      // The rate as its six decimals read back: equal only when it has no finer digit (and no
      // floating-point slack, which a tolerance on rate × 10^6 got wrong past ~67,000).
      if (rate !== undefined && Number(rate.toFixed(6)) !== rate) problems.push(`limits.${surface}.${scope}.per_second: must be a multiple of 0.000001, got ${rate}`)
    }
  }
  const metricsTokenEnv = file.metrics?.token_env
  const metricsToken = metricsTokenEnv ? env[metricsTokenEnv] : undefined
  if (metricsTokenEnv && (!metricsToken || metricsToken.length < 16)) {
    problems.push(`metrics.token_env: ${metricsTokenEnv} must be set to a token of at least 16 characters`)
  } else if (metricsTokenEnv && /[\s\p{Cc}]/u.test(metricsToken!)) {
    // The bearer /metrics reads is one run of non-space characters: this token could never match.
    problems.push(`metrics.token_env: ${metricsTokenEnv} must not contain spaces or control characters (a trailing newline from a secret file, say)`)
  }
  const adminPort = file.metrics?.port
  if (adminPort !== undefined && adminPort !== 0 && adminPort === port) {
    problems.push(`metrics.port: ${adminPort} is the public PORT too; the admin port needs a port of its own`)
  }
  const staleAfterS = file.ledger?.instance_stale_after_s ?? 30
  if (staleAfterS * 1000 < MIN_STALE_AFTER_MS) {
    problems.push(
      `ledger.instance_stale_after_s: must be at least ${MIN_STALE_AFTER_MS / 1000} (${MIN_STALE_AFTER_MS / HEARTBEAT_MS} heartbeats of ${HEARTBEAT_MS / 1000} s), ` +
        `got ${staleAfterS}: a live instance would be declared stale between its own heartbeats and its leases returned`,
    )
  }
  const deviceCodeTtlS = file.oauth?.device_code_ttl_s ?? 600
  const devicePollIntervalS = file.oauth?.device_poll_interval_s ?? 5
  if (deviceCodeTtlS < 3 * devicePollIntervalS) {
    // The device flow's client waits one interval before each poll (RFC 8628 §3.5): a code that
    // lives one interval or less can never be redeemed, and two leaves one poll.
    problems.push(
      `oauth.device_code_ttl_s: must be at least 3 × oauth.device_poll_interval_s (${3 * devicePollIntervalS}), got ${deviceCodeTtlS}: ` +
        'svc login waits one interval before each poll, and the code would expire before it could be redeemed',
    )
  }
  const ownerEmail = file.bootstrap?.owner_email
  if (ownerEmail !== undefined && !isEmail(ownerEmail)) problems.push(`bootstrap.owner_email: must be an email address, got "${ownerEmail}"`)
  // The first boot's organization is named here, and its name is printed as raw as any other's.
  const orgNameProblem = file.bootstrap?.org_name === undefined ? undefined : nameTextProblem(file.bootstrap.org_name)
  if (orgNameProblem !== undefined) problems.push(`bootstrap.org_name: ${orgNameProblem}`)
  if (problems.length > 0) throw new ConfigError(problems)
  const planList = [...plans.values()]
  const defaultPlanId = (planList.find(plan => plan.fusion) ?? planList[0]!).id

  return Object.freeze({
    port,
    databaseUrl,
    databaseAuthToken: env.DATABASE_AUTH_TOKEN || undefined,
    databaseTimeoutMs: Math.round(databaseTimeoutS * 1000),
    logLevel,
    instanceId: env.SVC_INSTANCE_ID || undefined,
    faultPoint: faultPoint as FaultPoint | undefined,
    oauth: Object.freeze({
      issuer: file.oauth?.issuer,
      accessTokenTtlMs: (file.oauth?.access_token_ttl_s ?? 3600) * 1000,
      refreshTokenTtlMs: (file.oauth?.refresh_token_ttl_s ?? 30 * 86_400) * 1000,
      codeTtlMs: (file.oauth?.code_ttl_s ?? 60) * 1000,
      deviceCodeTtlMs: deviceCodeTtlS * 1000,
      devicePollIntervalS,
    }),
    mcp: Object.freeze({ allowedOrigins: Object.freeze([...(file.mcp?.allowed_origins ?? [])]) }),
    bootstrap: Object.freeze({
      enabled: bootstrapFlag !== '0',
      orgName: file.bootstrap?.org_name ?? 'default',
      ownerEmail: file.bootstrap?.owner_email ?? 'owner@localhost',
    }),
    plans,
    defaultPlanId,
    limits: Object.freeze({
      inference: Object.freeze({
        key: bucket(file.limits?.inference?.key, { burst: 60, perSecond: 1 }),
        org: bucket(file.limits?.inference?.org, { burst: 600, perSecond: 10 }),
      }),
      management: Object.freeze({
        key: bucket(file.limits?.management?.key, { burst: 30, perSecond: 0.5 }),
        org: bucket(file.limits?.management?.org, { burst: 120, perSecond: 2 }),
      }),
      orgInferenceConcurrency: file.limits?.org_inference_concurrency ?? 32,
    }),
    ledger: Object.freeze({
      bootstrapCreditNanos: bootstrapCredit ?? 0n,
      instanceStaleAfterMs: staleAfterS * 1000,
    }),
    metrics: Object.freeze({ token: metricsToken || undefined, port: file.metrics?.port, host: file.metrics?.host ?? '127.0.0.1' }),
    shutdown: Object.freeze({ drainTimeoutMs: Math.round((file.shutdown?.drain_timeout_s ?? 25) * 1000) }),
    auth: Object.freeze({ cacheTtlMs: file.auth?.cache_ttl_ms ?? 2000, cacheMaxEntries: file.auth?.cache_max_entries ?? 100_000 }),
    fusion: Object.freeze({
      judge,
      participantTimeoutMs: file.fusion?.participant_timeout_ms ?? 120_000,
      judgeTimeoutMs: file.fusion?.judge_timeout_ms ?? 120_000,
    }),
    documents: documentsConfig(file.documents, parsePrice ?? 0n),
    providers: Object.freeze(providers),
    models: Object.freeze(models),
    web,
    prices,
    source,
  })
}

const MiB = 1024 * 1024

function documentsConfig(raw: FileConfig['documents'], pricePerParseNanos: bigint): DocumentsConfig {
  const cores = typeof navigator !== 'undefined' && navigator.hardwareConcurrency > 0 ? navigator.hardwareConcurrency : 2
  return Object.freeze({
    workers: raw?.workers || cores,
    queueSize: raw?.queue_size ?? 64,
    timeoutMs: raw?.timeout_ms ?? 10_000,
    maxTextBytes: raw?.max_text_bytes ?? 4 * MiB,
    memoryBudgetBytes: (raw?.memory_budget_mb ?? 2048) * MiB,
    // A real DOCX/XLSX of 4 MiB holds a few hundred entries and inflates 5-20x; these leave room.
    zip: Object.freeze({ maxEntries: raw?.zip_max_entries ?? 5000, maxInflatedBytes: raw?.zip_max_inflated_bytes ?? 64 * MiB, maxRatio: raw?.zip_max_ratio ?? 200 }),
    pdf: Object.freeze({ maxPages: raw?.pdf_max_pages ?? 2000, maxObjects: raw?.pdf_max_objects ?? 500_000, maxNesting: raw?.pdf_max_nesting ?? 256 }),
    pricePerParseNanos,
  })
}

function bucket(raw: { burst: number; per_second: number } | undefined, fallback: BucketRule): BucketRule {
  return Object.freeze(raw ? { burst: raw.burst, perSecond: raw.per_second } : fallback)
}

function readFileText(path: string): string {
  return require('node:fs').readFileSync(path, 'utf8')
}

/** PORT, 8080 when unset; a bad value is added to `problems`. */
export function parsePort(raw: string | undefined, problems: string[]): number {
  if (raw === undefined || raw === '') return 8080
  const port = /^[0-9]{1,5}$/.test(raw) ? Number(raw) : NaN
  if (!(port >= 0 && port <= 65535)) problems.push(`PORT: must be an integer from 0 to 65535, got "${raw}"`)
  return port
}

function readConfigFile(path: string, readText: (path: string) => string, problems: string[]): string | undefined {
  try {
    return readText(path)
  } catch (error) {
    problems.push(`SVC_CONFIG: cannot read "${path}": ${(error as Error).message}`)
    return undefined
  }
}

/** A union's choice as written in YAML: `none`, not `"none"`. */
function unquote(choice: string): string {
  return choice.startsWith('"') ? (JSON.parse(choice) as string) : choice
}

function parseFile(text: string | undefined, source: string, problems: string[]): FileConfig | undefined {
  if (text === undefined) return undefined
  let raw: unknown
  try {
    raw = Bun.YAML.parse(text)
  } catch (error) {
    problems.push(`${source}: not valid YAML or JSON: ${(error as Error).message}`)
    return undefined
  }
  // Bun.YAML keeps the last of two equal keys; a key written twice must stop the boot instead.
  const duplicate = duplicateKey(text)
  if (duplicate !== undefined) {
    problems.push(`${source}: line ${duplicate.line}, column ${duplicate.column}: the key ${duplicate.key} appears twice in one mapping (each key may be given once)`)
    return undefined
  }
  if (raw === null || raw === undefined) {
    problems.push(`SVC_CONFIG: "${source}" holds no configuration (empty, or comments only); it needs at least a plans: section`)
    return undefined
  }
  if (Value.Check(FileConfigSchema, raw)) return raw
  const named = new Set<string>()
  for (const found of Value.Errors(FileConfigSchema, raw)) {
    // A union (`type`, `level`, `web.search`…) names the values allowed, or the problem inside the
    // variant the value was meant for (a searxng backend without base_url), never "Expected union value".
    const explained = explainUnion(found)
    const error = 'error' in explained ? explained.error : undefined
    const path = (error?.path ?? ('path' in explained ? explained.path : found.path)).replace(/^\//, '').replaceAll('/', '.') || '(root)'
    // One problem per field: a missing one is not also "Expected object" or "Expected integer".
    if (named.has(path)) continue
    named.add(path)
    if (error === undefined) {
      // Literal values (quoted) are choices; anything else is the kinds the union takes.
      const { choices } = explained as { choices: string[] }
      problems.push(choices.every(choice => choice.startsWith('"')) ? `${path}: must be one of ${choices.map(unquote).join(', ')}` : `${path}: Expected ${choices.join(' or ')}`)
      continue
    }
    const money = typeof error.schema.description === 'string' && error.schema.description.startsWith('USD decimal string')
    const hint = typeof error.value === 'number' && money ? ' (write money as a quoted decimal string)' : ''
    problems.push(`${path}: ${problemOf(error)}${hint}`)
  }
  return undefined
}
