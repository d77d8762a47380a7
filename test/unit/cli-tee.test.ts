import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import { runCli } from '../../src/commands'
import { loadClientConfig } from '../../src/config/client'
import { loadConfig } from '../../src/config/load'
import { devTee } from '../../src/operator/dev-tee'
import { encryptedChatCommand } from '../../src/operator/encrypted-chat'
import { bootstrapIfEmpty } from '../../src/orgs/bootstrap'
import type { SimTeeBackend } from '../../src/tee/sim/server'
import { captureIo as capture, runProcess } from '../support/cli'
import { FORGED, startForgingRelay } from '../support/forging-relay'
import { buildTestApp } from '../support/harness'
import { NEAR_V2, startTeeGateway, type TeeGateway } from '../support/tee'

let t: TeeGateway
let url: string
let key: string
beforeAll(async () => {
  t = await startTeeGateway([{ id: 'near', proofFormat: NEAR_V2, sim: { reasoning: true } }])
  url = t.listen()
  key = (await t.createOrg()).adminKey
})
afterAll(() => t.stopAll())

describe('svc encrypted-chat', () => {
  const config = loadClientConfig({})
  for (const algo of ['ecdsa', 'ed25519']) {
    test(`${algo}: streams the decrypted answer and says what was and was not verified`, async () => {
      const { io, err, written } = capture()
      await encryptedChatCommand(config, ['--model', 'sim:encrypted', '--url', url, '--key', key, '--algo', algo, 'hello cli'], io)
      expect(written.join('')).toBe('echo: hello cli\n')
      expect(written.length).toBeGreaterThan(2)
      expect(err[0]).toStartWith('[streamed reply NOT authenticated: the gateway offers no signature over a stream')
      expect(err[0]).toContain('hardware quote chain NOT verified; SIMULATED evidence')
      expect(t.sims.near!.state.seen.at(-1)!.rawBody).not.toContain('hello cli')
    })
  }

  test('--json and --no-stream', async () => {
    const { io, out, err } = capture()
    await encryptedChatCommand(config, ['--model', 'sim:encrypted', '--url', url, '--key', key, '--no-stream', '--json', 'hi'], io)
    // What was and was not verified is said on stderr with --json too (QA: only in text mode).
    expect(err[0]).toStartWith('[reply signed by the attested key over this request and the exact reply bytes; ')
    expect(err[0]).toContain('hardware quote chain NOT verified')
    expect(JSON.parse(out[0]!)).toMatchObject({ content: 'echo: hi', reasoning: 'thinking about: hi', authenticated: true, binding: { bound: true, simulated: true, hardware_verified: false } })
  })

  test('--no-stream through a relay that forges the reply: refused, exit 1 (QA: printed the forgery, exit 0)', async () => {
    const relay = startForgingRelay(url, NEAR_V2, t.sims.near!.modelName)
    try {
      relay.state.forgery = 'reply'
      const { io, err, written } = capture()
      expect(await runCli(['encrypted-chat', '--model', 'sim:encrypted', '--url', relay.url, '--key', key, '--no-stream', 'x'], { SVC_LOG_LEVEL: 'error' }, io)).toBe(0)
      // Forged outside the evidence only: the signed reply is what is read.
      expect(written.join('')).toBe('echo: x\n')
      expect(err[0]).toStartWith('[reply signed by the attested key')
      for (const forgery of ['reply-and-evidence', 'strip-evidence'] as const) {
        relay.state.forgery = forgery
        const refused = capture()
        expect(await runCli(['encrypted-chat', '--model', 'sim:encrypted', '--url', relay.url, '--key', key, '--no-stream', 'x'], { SVC_LOG_LEVEL: 'error' }, refused.io)).toBe(1)
        expect(refused.err.join('\n')).toStartWith('error: encrypted chat failed: the reply is not authenticated, so it was refused: ')
        expect(refused.written.join('')).not.toContain(FORGED)
      }
      // A stream cannot be checked: what stderr says of it.
      relay.state.forgery = 'reply'
      const streamed = capture()
      expect(await runCli(['encrypted-chat', '--model', 'sim:encrypted', '--url', relay.url, '--key', key, 'x'], { SVC_LOG_LEVEL: 'error' }, streamed.io)).toBe(0)
      expect(streamed.written.join('')).toBe(`${FORGED}\n`)
      expect(streamed.err[0]).toContain('streamed reply NOT authenticated')
    } finally {
      relay.stop()
    }
  })

  test('a streamed answer standard output does not take: the write error, as every command prints it (QA: "encrypted chat failed: …")', async () => {
    const { io, err } = capture()
    const closed = { ...io, write: () => { throw new Error('cannot write to standard output: it is closed') } }
    expect(await runCli(['encrypted-chat', '--model', 'sim:encrypted', '--url', url, '--key', key, 'x'], { SVC_LOG_LEVEL: 'error' }, closed)).toBe(1)
    expect(err).toEqual(['error: cannot write to standard output: it is closed'])
    const cli = join(import.meta.dir, '../../src/cli.ts')
    const real = await runProcess(['sh', '-c', `exec bun ${cli} encrypted-chat --model sim:encrypted 'hi there' >&-`], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, SVC_URL: url, SVC_API_KEY: key, SVC_LOG_LEVEL: 'error' },
    })
    expect(real.stderr).toBe('error: cannot write to standard output: it is closed\n')
    expect(real.code).toBe(1)
  })

  test('usage errors exit 2; a refused binding or gateway error exits 1', async () => {
    const { io, err } = capture()
    expect(await runCli(['encrypted-chat', '--model', 'sim:confidential', '--key', key, 'x'], { SVC_LOG_LEVEL: 'error' }, io)).toBe(2)
    expect(err.join('\n')).toContain(':encrypted')
    t.sims.near!.state.faults = { echoWrongNonce: true }
    try {
      const failed = capture()
      expect(await runCli(['encrypted-chat', '--model', 'sim:encrypted', '--url', url, '--key', key, 'x'], { SVC_LOG_LEVEL: 'error' }, failed.io)).toBe(1)
      expect(failed.err.join('\n')).toContain('HTTP 503')
    } finally {
      t.sims.near!.state.faults = {}
    }
  })
})

describe('svc dev-tee', () => {
  test('serves a simulated backend, prints URL, token and a complete config, and stops', async () => {
    const { io, out } = capture()
    const stop = new AbortController()
    let running: Promise<void> = Promise.resolve()
    const sim = await new Promise<SimTeeBackend>(resolve => {
      running = devTee(['--family', 'phala', '--version', '1', '--faults', 'dropSignature', '--json'], io, stop.signal, resolve)
    })
    const printed = JSON.parse(out[0]!)
    expect(printed).toMatchObject({ url: sim.url, token: sim.token, family: 'phala', proof_format: 'dstack-tdx-nvgpu.addr-nonce.e2ee-phala.v1', faults: ['dropSignature'] })
    expect((await fetch(`${sim.url}/models`)).status).toBe(200)
    stop.abort()
    await running
  })

  test('the printed config is a whole SVC_CONFIG file: as-is, the gateway boots and serves demo-tee at every level (README)', async () => {
    const { io, out, err } = capture()
    const stop = new AbortController()
    let running: Promise<void> = Promise.resolve()
    const sim = await new Promise<SimTeeBackend>(resolve => {
      running = devTee([], io, stop.signal, resolve)
    })
    // stdout is the config alone (`svc dev-tee > tee.yaml` saves a file that loads); the rest goes to stderr.
    const snippet = out.join('\n')
    expect(snippet).toStartWith('providers:')
    expect(err.join('\n')).toContain('a complete config follows on stdout: save it as the file SVC_CONFIG names')
    const env = { SVC_CONFIG: '/dev-tee.yaml', SVC_DEV_TEE_KEY: sim.token, SVC_LOG_LEVEL: 'error' }
    const gateway = await buildTestApp(env, loadConfig(env, () => snippet))
    try {
      // First boot, as `svc serve` does it: the admin key it prints.
      const booted = await bootstrapIfEmpty(gateway.deps)
      expect(booted).not.toBeNull()
      const chat = (model: string) => gateway.request('POST', '/v1/chat/completions', { key: booted!.secret, body: { model, messages: [{ role: 'user', content: 'hi' }] } })
      expect((await chat('demo-tee')).status).toBe(200)
      expect((await chat('demo-tee:confidential')).status).toBe(200)
      // README: SVC_URL=… SVC_API_KEY=… bun examples/encrypted-chat.ts demo-tee:encrypted "hello"
      const { stdout, code } = await runProcess(['bun', 'examples/encrypted-chat.ts', 'demo-tee:encrypted', 'hello'], { env: { ...process.env, SVC_URL: gateway.listen(), SVC_API_KEY: booted!.secret } })
      expect(stdout).toBe('echo: hello\n')
      expect(code).toBe(0)
    } finally {
      await gateway.close()
      stop.abort()
      await running
    }
  })

  test('bad options are usage errors', async () => {
    const { io } = capture()
    expect(await runCli(['dev-tee', '--family', 'tinfoil'], { SVC_LOG_LEVEL: 'error' }, io)).toBe(2)
    expect(await runCli(['dev-tee', '--faults', 'nope'], { SVC_LOG_LEVEL: 'error' }, io)).toBe(2)
  })

  // Number('') is 0: an empty --port started on a random port instead of refusing (QA tee #3).
  for (const port of ['', ' ', 'abc', '1.5', '-1', '70000', '0x50', '1e3', ' 80']) {
    test(`--port ${JSON.stringify(port)} is a usage error, before anything starts`, async () => {
      const { io, err } = capture()
      expect(await runCli(['dev-tee', `--port=${port}`], { SVC_LOG_LEVEL: 'error' }, io)).toBe(2)
      expect(err.join('\n')).toContain('--port must be a port number')
    })
  }

  // As its own word, parseArgs called a value with a leading dash "ambiguous" before --port saw it.
  for (const port of ['-1', '-80']) {
    test(`--port ${port} (a separate word) gets the same message`, async () => {
      const { io, err } = capture()
      expect(await runCli(['dev-tee', '--port', port], { SVC_LOG_LEVEL: 'error' }, io)).toBe(2)
      expect(err[0]).toStartWith(`usage error: --port must be a port number (0 to 65535), got "${port}"`)
    })
  }

  test('a flag after a flag that needs a value is still refused, not taken as the value', async () => {
    const { io, err } = capture()
    expect(await runCli(['dev-tee', '--port', '--reasoning'], { SVC_LOG_LEVEL: 'error' }, io)).toBe(2)
    expect(err[0]).toStartWith("usage error: Option '--port' argument is ambiguous.")
  })

  for (const faults of [',,', '', 'echoWrongNonce,', 'echoWrongNonce,,status500']) {
    test(`--faults ${JSON.stringify(faults)} (an empty fault name) is a usage error`, async () => {
      const { io, err } = capture()
      expect(await runCli(['dev-tee', '--faults', faults], { SVC_LOG_LEVEL: 'error' }, io)).toBe(2)
      expect(err.join('\n')).toContain('--faults')
    })
  }
})

describe('examples/encrypted-chat.ts', () => {
  test('runs against a gateway through the package export svc-gateway/client', async () => {
    const { stdout, stderr, code } = await runProcess(['bun', 'examples/encrypted-chat.ts', 'sim:encrypted', 'from the example'], { env: { ...process.env, SVC_URL: url, SVC_API_KEY: key } })
    expect(stderr).toContain('ok   quote binds nonce')
    expect(stdout).toBe('echo: from the example\n')
    expect(code).toBe(0)
  })
})
