import { afterEach, expect, test } from 'bun:test'
import { AttestedProvider } from '../../src/providers/attested/provider'
import { UpstreamError } from '../../src/providers/types'
import { parseProofFormat } from '../../src/tee/proof-format'
import { providerConfig } from '../providers/fixtures'

// An attested backend whose evidence answer never ends: it is refused once past the 8 MiB cap,
// not read into memory until the fetch's deadline (connect + idle timeouts: 70 s by default); and
// one whose answer stalls while its caller leaves is no backend failure.

let server: ReturnType<typeof Bun.serve> | undefined
afterEach(() => server?.stop(true))

test('an attestation answer that never ends is refused past 8 MiB, and its connection closed', async () => {
  let sent = 0
  let resolveCut!: () => void
  const cut = new Promise<void>(resolve => (resolveCut = resolve))
  const piece = new TextEncoder().encode(' '.repeat(64 * 1024))
  server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: () =>
      new Response(
        new ReadableStream<Uint8Array>({
          start: controller => controller.enqueue(new TextEncoder().encode('{"padding":"')),
          pull: async controller => {
            await new Promise(resolve => setImmediate(resolve))
            sent += piece.length
            controller.enqueue(piece)
          },
          cancel: () => resolveCut(),
        }),
        { headers: { 'content-type': 'application/json' } },
      ),
  })
  const provider = new AttestedProvider(
    providerConfig({
      type: 'attested', id: 'tee', baseUrl: `http://127.0.0.1:${server.port}/v1`,
      // Deadlines far past the test's own: only the size cap can end this.
      connectTimeoutMs: 600_000, idleTimeoutMs: 600_000,
      attested: { proofFormat: parseProofFormat('dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2')!, signingAlgos: ['ecdsa'] },
    }),
  )
  const error = await provider.attest({ upstreamModel: 'tee-model', nonce: 'ab'.repeat(32), algo: 'ecdsa' }).catch(thrown => thrown)
  expect(error).toBeInstanceOf(UpstreamError)
  expect(error).toMatchObject({ kind: 'server', message: 'attestation answer too large', details: { phase: 'attestation' } })
  await cut
  // What the server wrote before it saw the abort (socket buffers) varies with load; unbounded, it ran to the deadline.
  expect(sent).toBeLessThan(40 * 1024 * 1024)
}, 10_000)

test("a caller leaving while the evidence's body arrives is 'aborted', not the backend's failure (review: it read as 'not JSON', cooling a healthy backend down)", async () => {
  let stalled!: () => void
  const reached = new Promise<void>(resolve => (stalled = resolve))
  server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: () =>
      new Response(
        new ReadableStream<Uint8Array>({
          start: controller => {
            controller.enqueue(new TextEncoder().encode('{"signing_address":'))
            stalled()
          },
        }),
        { headers: { 'content-type': 'application/json' } },
      ),
  })
  const provider = new AttestedProvider(
    providerConfig({
      type: 'attested', id: 'tee', baseUrl: `http://127.0.0.1:${server.port}/v1`, connectTimeoutMs: 600_000, idleTimeoutMs: 600_000,
      attested: { proofFormat: parseProofFormat('dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2')!, signingAlgos: ['ecdsa'] },
    }),
  )
  // The caller leaves once the provider reads the body (its headers came): no timer, no race.
  let reading!: () => void
  const bodyRead = new Promise<void>(resolve => (reading = resolve))
  const getReader = ReadableStream.prototype.getReader
  ReadableStream.prototype.getReader = function (this: ReadableStream, ...args: []) {
    reading()
    return getReader.apply(this, args)
  } as typeof getReader
  const caller = new AbortController()
  let error: unknown
  try {
    const pending = provider.attest({ upstreamModel: 'tee-model', nonce: 'ab'.repeat(32), algo: 'ecdsa', signal: caller.signal }).catch(thrown => thrown)
    await Promise.all([reached, bodyRead])
    caller.abort()
    error = await pending
  } finally {
    ReadableStream.prototype.getReader = getReader
  }
  expect(error).toBeInstanceOf(UpstreamError)
  expect(error).toMatchObject({ kind: 'aborted', retryable: false })
}, 10_000)

test("the deadline passing while the evidence's body arrives is a timeout, not 'not JSON' (review)", async () => {
  server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: () => new Response(new ReadableStream<Uint8Array>({ start: controller => controller.enqueue(new TextEncoder().encode('{"signing_address":')) }), { headers: { 'content-type': 'application/json' } }),
  })
  // A 400 ms deadline (connect + idle): it passes while the body stalls, its headers long arrived.
  const provider = new AttestedProvider(
    providerConfig({
      type: 'attested', id: 'tee', baseUrl: `http://127.0.0.1:${server.port}/v1`, connectTimeoutMs: 200, idleTimeoutMs: 200,
      attested: { proofFormat: parseProofFormat('dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2')!, signingAlgos: ['ecdsa'] },
    }),
  )
  const error = await provider.attest({ upstreamModel: 'tee-model', nonce: 'ab'.repeat(32), algo: 'ecdsa' }).catch(thrown => thrown)
  expect(error).toBeInstanceOf(UpstreamError)
  expect(error).toMatchObject({ kind: 'timeout', retryable: true })
}, 10_000)
