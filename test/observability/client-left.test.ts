import { expect, test } from 'bun:test'
import { Elysia } from 'elysia'
import { ApiError } from '../../src/http/errors'
import { requestContext } from '../../src/http/request-context'
import { GatewayMetrics } from '../../src/observability/gateway-metrics'
import { createLogger } from '../../src/observability/logger'
import { recordOf, RequestLog } from '../../src/observability/request-log'

// README (Metrics and logs): a call whose client left before its response is logged `cancelled`
// with status 499, never as a failure, and svc_refusals_total counts only the gateway's own
// refusals. The error handler decides it for every route, whichever call threw (recordFailure,
// which MCP's tool failures use too): before, it trusted only an outcome the call had set, so the
// `unavailable` of a call that could not mark its request (a chat's hosted search) was logged 503
// and counted as a refusal.

function app() {
  const lines: Array<Record<string, unknown>> = []
  const metrics = new GatewayMetrics()
  const logger = createLogger('info', line => lines.push(JSON.parse(line)))
  const served = new Elysia()
    .use(requestContext(logger, new RequestLog(logger, metrics)))
    // Throws once its client has left, without marking the request (as a hosted search in chat).
    .post('/left', async ({ request }) => {
      await new Promise(resolve => request.signal.addEventListener('abort', resolve, { once: true }))
      throw new ApiError('unavailable', 'the request was cancelled before its results were delivered')
    })
    // A call that set its own outcome keeps it (the drain's deadline cut it: `aborted`, its 503).
    .post('/cut', async ({ request }) => {
      await new Promise(resolve => request.signal.addEventListener('abort', resolve, { once: true }))
      recordOf(request)!.outcome = 'aborted'
      throw new ApiError('unavailable', 'the gateway is shutting down')
    })
    .post('/refused', () => {
      throw new ApiError('unavailable', 'the database is unavailable; retry shortly')
    })
  const send = async (path: string, leave: boolean) => {
    const client = new AbortController()
    const answered = served.handle(new Request(`http://localhost${path}`, { method: 'POST', signal: client.signal, headers: { 'x-request-id': `req${path.replace('/', '-')}` } }))
    if (leave) client.abort()
    await answered.catch(() => undefined)
    return lines.find(line => line.msg === 'request' && line.request_id === `req${path.replace('/', '-')}`)
  }
  return { send, refusals: () => metrics.registry.render().split('\n').filter(line => line.startsWith('svc_refusals_total{')) }
}

test('a call that fails after its client left is logged 499 cancelled and is no refusal; other failures keep their code and count', async () => {
  const { send, refusals } = app()
  expect(await send('/left', true)).toMatchObject({ route: '/left', status: 499, outcome: 'cancelled' })
  expect(refusals()).toEqual([])
  expect(await send('/cut', true)).toMatchObject({ route: '/cut', status: 503, outcome: 'aborted' })
  expect(await send('/refused', false)).toMatchObject({ route: '/refused', status: 503, outcome: 'unavailable' })
  expect(refusals()).toEqual(['svc_refusals_total{code="unavailable"} 2'])
})
