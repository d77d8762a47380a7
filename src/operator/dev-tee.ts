import { parseProofFormat } from '../tee/proof-format'
import { startSimTeeBackend, type SimFaults, type SimTeeBackend } from '../tee/sim/server'
import { parseOptions, report, UsageError, type CliIo } from './io'

const FAULTS: ReadonlyArray<keyof SimFaults> = [
  'echoWrongNonce', 'gpuWrongNonce', 'quoteWrongNonce', 'emptyQuote', 'emptyGpuEvidence', 'omitRequestNonce', 'wrongAlgoEcho', 'keyAddressMismatch', 'status500', 'dropSignature', 'abortStream', 'jsonForStream', 'noContentType', 'emptyAnswer', 'blankAnswer',
]

/**
 * `svc dev-tee [--port N] [--family nearai|phala] [--version 1|2] [--faults a,b] [--reasoning] [--json]`:
 * runs the simulated TEE backend (TEE-PROTOCOL.md B5) on 127.0.0.1 and prints its URL, token and
 * a complete config file offering `demo-tee` with `:confidential` and `:encrypted` levels on it.
 * It serves until `stop` aborts (SIGINT/SIGTERM from the CLI). Its quotes are marked simulated:
 * never trust them.
 */
export async function devTee(args: string[], io: CliIo, stop: AbortSignal, started?: (sim: SimTeeBackend) => void): Promise<void> {
  const { values } = parseOptions(args, { port: { type: 'string' }, family: { type: 'string' }, version: { type: 'string' }, faults: { type: 'string' }, reasoning: { type: 'boolean' }, json: { type: 'boolean' } })
  const family = values.family ?? 'nearai'
  if (family !== 'nearai' && family !== 'phala') throw new UsageError('--family must be nearai or phala')
  const version = values.version ?? '2'
  if (version !== '1' && version !== '2') throw new UsageError('--version must be 1 or 2')
  // Digits only: Number() reads '' and ' ' as 0 (a random port) and '0x50' or '1e3' as numbers.
  const port = values.port === undefined ? 0 : /^[0-9]{1,5}$/.test(values.port) ? Number(values.port) : NaN
  if (!(port >= 0 && port <= 65535)) throw new UsageError(`--port must be a port number (0 to 65535), got "${values.port}"`)
  const faults: SimFaults = {}
  const names = values.faults === undefined ? [] : values.faults.split(',')
  if (names.includes('')) throw new UsageError(`--faults takes fault names separated by commas, none empty; got "${values.faults}"`)
  for (const name of names) {
    if (!FAULTS.includes(name as keyof SimFaults)) throw new UsageError(`unknown fault "${name}" (known: ${FAULTS.join(', ')})`)
    ;(faults as Record<string, boolean>)[name] = true
  }
  const proofFormat = `dstack-tdx-nvgpu.addr-nonce.e2ee-${family}.v${version}`
  parseProofFormat(proofFormat)
  const sim = startSimTeeBackend({ family, port, faults, reasoning: values.reasoning === true })
  // A whole config file, since SVC_CONFIG replaces the embedded default rather than adding to
  // it: the demo provider demo-tee's unsuffixed id runs on, and the plans every config needs.
  const snippet = [
    'providers:',
    '  - { id: demo, type: demo, retention: none }',
    `  - { id: dev-tee, type: attested, base_url: "${sim.url}", api_key_env: SVC_DEV_TEE_KEY, proof_format: ${proofFormat} }`,
    'models:',
    '  - id: demo-tee',
    '    backends: [{ provider: demo, model: demo }]',
    `    confidential: [{ provider: dev-tee, model: ${sim.modelName} }]`,
    `    encrypted: [{ provider: dev-tee, model: ${sim.modelName} }]`,
    '    price: { input_per_mtok: "0.10", output_per_mtok: "0.40" }',
    '    context_length: 32768',
    '    max_output_tokens: 4096',
    `    capabilities: { tools: ${family === 'nearai'}, reasoning: true }`,
    'plans:',
    '  pro: { monthly_allowance: "20", fusion: true }',
  ].join('\n')
  if (values.json) {
    report(io, true, { url: sim.url, token: sim.token, family, proof_format: proofFormat, model: sim.modelName, faults: Object.keys(faults), config: snippet }, [])
  } else {
    // The config alone on stdout, so `svc dev-tee > tee.yaml` saves a file that loads; the rest
    // is for the person reading the terminal.
    for (const line of [
      `simulated TEE backend (${family}, ${proofFormat}) at ${sim.url}`,
      `token: ${sim.token}   (export SVC_DEV_TEE_KEY=${sim.token})`,
      'its quotes are marked simulated (DEBUG TD, zero QE vendor id): no real verifier accepts them',
      'a complete config follows on stdout: save it as the file SVC_CONFIG names (it replaces the',
      'embedded default), or copy its dev-tee provider and demo-tee model into your own config',
    ]) io.err(line)
    io.out(snippet)
  }
  started?.(sim)
  await new Promise<void>(resolve => (stop.aborted ? resolve() : stop.addEventListener('abort', () => resolve(), { once: true })))
  await sim.stop()
}
