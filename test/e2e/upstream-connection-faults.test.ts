import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { ProviderConfig } from '../../src/config/config'
import { AnthropicProvider } from '../../src/providers/anthropic/provider'
import { OpenAICompatibleProvider } from '../../src/providers/openai-compatible/provider'
import type { Provider } from '../../src/providers/types'
import { rejection } from '../providers/events'
import { providerCall, providerConfig, testRequest } from '../providers/fixtures'
import { paygConfig, startServedGateway, upstreamProvider, type ServedGateway, type UpstreamType } from '../support/gateway'

// A backend whose connection fails before an answer (reset before the headers, not HTTP, garbage
// headers, a declared length cut short) is a `connection` failure on every attempt, the last one
// included. On its last attempt the router lends the provider the call's own AbortController;
// the Anthropic provider disposed it (which aborts it) before classifying the failure, so the
// failure read as the client leaving: `aborted`, a 502 "the upstream provider failed: aborted",
// and nothing in svc_upstream_requests_total or svc_upstream_errors_total (QA chaos pass).

/** What the raw server plays on each connection, chosen by the first byte of the request's path after `/f/`. */
const FAULTS = {
  'reset before headers': 'r',
  'not HTTP': 'n',
  'garbage headers': 'g',
  'declared length cut short': 'c',
} as const

const SSE = 'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}\n\n'

/** An HTTP/1.1 peer written by hand: Bun.serve can play none of these faults. */
function faultyServer() {
  return Bun.listen({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      data(socket, data) {
        const fault = /^POST \/f\/(\w)/.exec(data.toString('latin1'))?.[1]
        if (fault === 'r') return void socket.terminate()
        if (fault === 'n') return void socket.end('SSH-2.0-OpenSSH_9.6\r\n')
        if (fault === 'g') return void socket.end(`HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: abc\r\n\r\n${SSE}`)
        // A body shorter than the length it declared, then the connection closed.
        if (fault === 'c') return void socket.end(`HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: ${SSE.length + 500}\r\n\r\n${SSE}`)
        socket.end('HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n')
      },
    },
  })
}

let raw: ReturnType<typeof faultyServer>
beforeAll(() => {
  raw = faultyServer()
})
afterAll(() => {
  raw.stop(true)
})

const TYPES: readonly UpstreamType[] = ['anthropic', 'openai-compatible']

function provider(type: UpstreamType, fault: string): Provider {
  const config: ProviderConfig = providerConfig({ type, baseUrl: `http://127.0.0.1:${raw.port}/f/${fault}` })
  return type === 'anthropic' ? new AnthropicProvider(config) : new OpenAICompatibleProvider(config)
}

describe('a connection that fails before an answer is `connection`, with or without the call\'s controller lent', () => {
  for (const type of TYPES) {
    for (const [name, fault] of Object.entries(FAULTS)) {
      for (const lent of [false, true]) {
        for (const collect of [false, true]) {
          test(`${type}, ${name}${lent ? ', controller lent (last attempt)' : ''}${collect ? ', collected' : ''}`, async () => {
            const controller = new AbortController()
            const call = { ...providerCall(testRequest(), 'm', controller.signal), collect, ...(lent ? { abortable: controller } : {}) }
            const error = await rejection(provider(type, fault).stream(call))
            expect(error.kind).toBe('connection')
          })
        }
      }
    }
  }
})

describe('through the gateway: the only backend fails to connect', () => {
  for (const type of TYPES) {
    describe(type, () => {
      let g: ServedGateway
      beforeAll(async () => {
        const providers = Object.values(FAULTS).map(fault => upstreamProvider(`p${fault}`, type, `http://127.0.0.1:${raw.port}/f/${fault}`, 'UP_KEY'))
        const models = Object.values(FAULTS).map(
          fault => `  - { id: m${fault}, backends: [{ provider: p${fault}, model: x }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 8192, max_output_tokens: 256 }`,
        )
        g = await startServedGateway(paygConfig(providers, models), { UP_KEY: 'sk-up-0123456789' })
      })
      afterAll(async () => {
        await g.close()
      })

      for (const [name, fault] of Object.entries(FAULTS)) {
        test(`${name}: 502 naming the connection, counted as an upstream request and error`, async () => {
          for (const stream of [true, false]) {
            const response = await fetch(`${g.baseUrl}/v1/chat/completions`, {
              method: 'POST',
              headers: { authorization: `Bearer ${g.key}`, 'content-type': 'application/json' },
              body: JSON.stringify({ model: `m${fault}`, stream, messages: [{ role: 'user', content: 'hi' }] }),
            })
            expect(response.status).toBe(502)
            const body = (await response.json()) as { error: { message: string } }
            expect(body.error.message).toContain('connection')
          }
          const metrics = g.t.deps.metrics.registry.render()
          const providerId = `${type}:p${fault}`
          expect(metrics).toContain(`svc_upstream_requests_total{provider="${providerId}",outcome="connection"} 2`)
          expect(metrics).toContain(`svc_upstream_errors_total{provider="${providerId}",kind="connection",phase="before-first-event"} 2`)
        })
      }
    })
  }
})
