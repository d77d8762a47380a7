import { afterAll, beforeAll } from 'bun:test'
import type Anthropic from '@anthropic-ai/sdk'
import type OpenAI from 'openai'
import { loadConfig } from '../../src/config/load'
import { startSimTeeBackend, type SimOptions, type SimTeeBackend } from '../../src/tee/sim/server'
import { anthropicClient, openAIClient } from './gateway'
import { buildConfiguredApp, buildTestApp, type TestApp } from './harness'
import type { DepsOverrides } from '../../src/deps'

/** The proof formats the simulated backends speak (TEE-PROTOCOL.md). */
export const NEAR_V2 = 'dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2'
export const NEAR_V1 = 'dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v1'
export const PHALA_V2 = 'dstack-tdx-nvgpu.addr-nonce.e2ee-phala.v2'
export const PHALA_V1 = 'dstack-tdx-nvgpu.addr-nonce.e2ee-phala.v1'

export interface TeeBackendSpec {
  id: string
  proofFormat: string
  sim?: SimOptions
  signingAlgos?: Array<'ed25519' | 'ecdsa'>
}

/** Two NEAR v2 backends `a` and `b` behind one model: for routing between attested backends. */
export const TWO_NEAR_BACKENDS: TeeBackendSpec[] = [
  { id: 'a', proofFormat: NEAR_V2 },
  { id: 'b', proofFormat: NEAR_V2 },
]

export interface TeeGateway extends TestApp {
  sims: Record<string, SimTeeBackend>
  stopAll(): Promise<void>
}

/**
 * A test gateway whose model `sim` has `:confidential` and `:encrypted` levels bound to
 * simulated TEE backends (one per spec, in order), next to the demo models.
 */
export async function startTeeGateway(
  specs: TeeBackendSpec[],
  options: {
    confidential?: string[]
    encrypted?: string[]
    capabilities?: string
    logger?: import('../../src/observability/logger').Logger
    /** Logical model ids bound alike (default: `sim` only), e.g. several Fusion participants and a judge. */
    models?: string[]
    /** The `fusion:` section's default judge. */
    fusionJudge?: string
  } = {},
): Promise<TeeGateway> {
  const sims: Record<string, SimTeeBackend> = {}
  const env: Record<string, string> = { SVC_CONFIG: '/virtual/tee.yaml' }
  const providers: string[] = ['  - { id: demo, type: demo, retention: none }']
  for (const spec of specs) {
    const sim = startSimTeeBackend({ family: spec.proofFormat.includes('phala') ? 'phala' : 'nearai', ...spec.sim })
    sims[spec.id] = sim
    const envName = `TEE_${spec.id.replace(/[^a-z0-9]/gi, '_').toUpperCase()}_KEY`
    env[envName] = sim.token
    const algos = spec.signingAlgos ? `, signing_algos: [${spec.signingAlgos.join(', ')}]` : ''
    providers.push(`  - { id: ${spec.id}, type: attested, base_url: "${sim.url}", api_key_env: ${envName}, proof_format: ${spec.proofFormat}${algos} }`)
  }
  const bind = (ids: string[]) => `[${ids.map(id => `{ provider: ${id}, model: ${sims[id]!.modelName} }`).join(', ')}]`
  const confidential = options.confidential ?? specs.map(spec => spec.id)
  const encrypted = options.encrypted ?? specs.filter(spec => spec.proofFormat.includes('e2ee')).map(spec => spec.id)
  const yaml = `providers:
${providers.join('\n')}
models:
  - id: demo-anonymous
    backends: [{ provider: demo, model: demo }]
    price: { input_per_mtok: "1", output_per_mtok: "2" }
    context_length: 32768
    max_output_tokens: 4096
${(options.models ?? ['sim']).map(id => `  - id: ${id}
    backends: [{ provider: demo, model: demo }]
${confidential.length ? `    confidential: ${bind(confidential)}\n` : ''}${encrypted.length ? `    encrypted: ${bind(encrypted)}\n` : ''}    price: { input_per_mtok: "1", output_per_mtok: "2" }
    context_length: 32768
    max_output_tokens: 4096
    capabilities: ${options.capabilities ?? '{ tools: true, reasoning: true }'}`).join('\n')}
${options.fusionJudge ? `fusion: { judge: ${options.fusionJudge}, participant_timeout_ms: 30000, judge_timeout_ms: 30000 }\n` : ''}plans:
  pro: { monthly_allowance: "0", fusion: true }
limits:
  inference: { key: { burst: 100000, per_second: 1000 }, org: { burst: 100000, per_second: 1000 } }
`
  const t = await buildTestApp(env, loadConfig(env, () => yaml), { logger: options.logger })
  return {
    ...t,
    sims,
    async stopAll() {
      await t.close()
      await Promise.all(Object.values(sims).map(sim => sim.stop()))
    },
  }
}

/** A TEE gateway served for a whole test file, with an organization and both SDKs on its admin key. */
export interface TeeSession {
  t: TeeGateway
  baseUrl: string
  key: string
  orgId: string
  openai: OpenAI
  anthropic: Anthropic
}

/**
 * `startTeeGateway(specs, options)` before the calling file's tests (served, with an
 * organization), stopped after them; `assign` stores what the tests read.
 */
export function teeGatewayForFile(specs: TeeBackendSpec[], options: Parameters<typeof startTeeGateway>[1], assign: (session: TeeSession) => void): void {
  let gateway: TeeGateway | undefined
  beforeAll(async () => {
    gateway = await startTeeGateway(specs, options)
    const org = await gateway.createOrg()
    const baseUrl = gateway.listen()
    assign({ t: gateway, baseUrl, key: org.adminKey, orgId: org.orgId, openai: openAIClient(baseUrl, org.adminKey), anthropic: anthropicClient(baseUrl, org.adminKey) })
  })
  afterAll(() => gateway?.stopAll())
}

/** One of gatewaysPerFormat's gateways: its organization's admin key and id. */
export interface FormatGateway {
  t: TeeGateway
  key: string
  orgId: string
}

/**
 * One TEE gateway per named proof format (a backend `name` of that format, the clock at real
 * time for the Encrypted timestamps), each with an organization, started before the calling
 * file's tests and stopped after them. The record fills in as they start.
 */
export function gatewaysPerFormat(formats: ReadonlyArray<readonly [string, string]>): Record<string, FormatGateway> {
  const gateways: Record<string, FormatGateway> = {}
  beforeAll(async () => {
    for (const [name, format] of formats) {
      const t = await startTeeGateway([{ id: name, proofFormat: format }])
      t.clock.set(Date.now())
      const org = await t.createOrg()
      gateways[name] = { t, key: org.adminKey, orgId: org.orgId }
    }
  })
  afterAll(async () => {
    for (const { t } of Object.values(gateways)) await t.stopAll()
  })
  return gateways
}

/**
 * A test gateway whose model `sim` answers from the demo backend and, at the `:encrypted` level
 * only, from the attested provider `providerId` at `baseUrl`: a proxy in front of `sim` that
 * plays a fault (the simulator's token and model name are used as they are).
 */
export async function buildEncryptedProxyApp(sim: SimTeeBackend, baseUrl: string, providerId = 'tee', overrides: DepsOverrides = {}): Promise<TestApp> {
  return buildConfiguredApp(`providers:
  - { id: demo, type: demo, retention: none }
  - { id: ${providerId}, type: attested, base_url: "${baseUrl}", api_key_env: TEE_KEY, proof_format: ${NEAR_V2} }
models:
  - id: sim
    backends: [{ provider: demo, model: demo }]
    encrypted: [{ provider: ${providerId}, model: ${sim.modelName} }]
    price: { input_per_mtok: "1", output_per_mtok: "2" }
    context_length: 32768
    max_output_tokens: 4096
plans:
  pro: { monthly_allowance: "0", fusion: true }
`, { SVC_CONFIG: '/virtual/tee.yaml', TEE_KEY: sim.token }, overrides)
}
