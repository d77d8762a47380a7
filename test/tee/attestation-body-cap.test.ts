import { afterEach, expect, test } from 'bun:test'
import { AttestedProvider } from '../../src/providers/attested/provider'
import { UpstreamError } from '../../src/providers/types'
import { parseProofFormat } from '../../src/tee/proof-format'
import { providerConfig } from '../providers/fixtures'

// An attested backend whose evidence answer never ends: it is refused once past the 8 MiB cap,
// not read into memory until the fetch's deadline (connect + idle timeouts: 70 s by default).

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
