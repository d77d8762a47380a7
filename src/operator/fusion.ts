import type { ClientConfig } from '../config/client'
import { displayUrl } from '../observability/logger'
import type { FusionParticipantBody, FusionResultBody } from '../fusion/schema'
import { decodeSse } from '../http/sse'
import { UUID } from '../lib/ids'
import { gatewayCredential } from './chat'
import { parseOptions, promptArgument, UsageError, type CliIo } from './io'

function participantLine(entry: FusionParticipantBody): string {
  if (entry.error) return `[${entry.model}: failed (${entry.error_code}): ${entry.error}]`
  return `[${entry.model}: ${entry.finish_reason}, ${entry.prompt_tokens} input tokens, ${entry.tokens} output tokens, ${entry.latency_ms} ms]`
}

/**
 * `svc fusion --models A,B[,C] [--judge J] [--system S] [--web-search] [--web-fetch]
 * [--request-id UUID] [--key K] [--url U] PROMPT`: one Fusion run through a running gateway
 * (POST /api/v1/chat/fusion with `stream: true`). The synthesis streams to stdout; each
 * participant's status goes to stderr as it ends, then a summary line. Credentials as `svc chat`.
 * Every run sends an Idempotency-Key (--request-id, else a fresh UUID, shown in the summary):
 * repeating a run with the same --request-id never bills a part twice. Web tools are opt-in, as
 * on the HTTP route. Exit 1 when there is no synthesis (every participant or the judge failed,
 * a judge that answered no text included), after printing what there is.
 */
export async function fusion(client: ClientConfig, args: string[], io: CliIo): Promise<void> {
  const { values, positionals } = parseOptions(
    args,
    {
      models: { type: 'string' }, judge: { type: 'string' }, system: { type: 'string' }, key: { type: 'string' }, url: { type: 'string' },
      'request-id': { type: 'string' }, 'web-search': { type: 'boolean' }, 'web-fetch': { type: 'boolean' }, json: { type: 'boolean' },
    },
    ['models'],
    'PROMPT',
  )
  const prompt = promptArgument(positionals)
  const models = values.models!.split(',').map(model => model.trim()).filter(model => model !== '')
  if (models.length < 2 || models.length > 3) throw new UsageError('--models takes 2 or 3 comma-separated model ids, e.g. --models demo-anonymous,demo-alt')
  // Spec §4.5: distinct models. Known here, so a usage error rather than the gateway's 400 (exit 1).
  const repeated = models.find((model, index) => models.indexOf(model) !== index)
  if (repeated !== undefined) throw new UsageError(`--models names ${repeated} twice; it takes 2 or 3 distinct model ids`)
  const requestId = values['request-id'] ?? crypto.randomUUID()
  if (!UUID.test(requestId)) throw new UsageError('--request-id must be a UUID')
  const { key, url } = await gatewayCredential(client, values)
  const body = {
    models,
    messages: [...(values.system ? [{ role: 'system', content: values.system }] : []), { role: 'user', content: prompt }],
    ...(values.judge ? { judge: values.judge } : {}),
    ...(values['web-search'] ? { web_search: true } : {}),
    ...(values['web-fetch'] ? { web_fetch: true } : {}),
    stream: true,
  }
  let response: Response
  try {
    response = await fetch(`${url}/api/v1/chat/fusion`, {
      method: 'POST',
      // The id printed is the run's in the gateway's log lines and ledger entries too.
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': requestId, 'x-request-id': requestId },
      body: JSON.stringify(body),
    })
  } catch (error) {
    throw new Error(`cannot reach the gateway at ${displayUrl(url)}: ${(error as Error).message}`)
  }
  if (!response.ok || !response.body) {
    const failure = (await response.json().catch(() => ({}))) as { error?: { message?: string } }
    throw new Error(`HTTP ${response.status}: ${failure.error?.message ?? response.statusText}`)
  }

  let result: FusionResultBody | undefined
  let streamed = false
  for await (const event of decodeSse(response.body)) {
    const data = JSON.parse(event.data)
    if (event.event === 'participant.finished' || event.event === 'participant.failed') {
      if (!values.json) io.err(participantLine(data.participant))
    } else if (event.event === 'synthesis.delta') {
      if (!values.json) io.write(data.delta)
      streamed = true
    } else if (event.event === 'error') {
      throw new Error(`the Fusion run failed: ${data.error?.message ?? 'unknown error'}`)
    } else if (event.event === 'fusion.completion') {
      result = data as FusionResultBody
    }
  }
  if (!result) throw new Error('the gateway closed the stream before the result')
  if (values.json) {
    io.out(JSON.stringify({ request_id: requestId, ...result }))
  } else {
    // A streamed synthesis ends its line, also one the judge's failure cut short.
    if (streamed) io.write('\n')
    if (result.synthesis === '') {
      // No synthesis: the answers that did arrive are still worth showing.
      for (const entry of result.models) if (!entry.error) io.write(`[${entry.model}]\n${entry.output}\n\n`)
    }
    const cut = result.synthesis_finish_reason === 'length' ? ', cut at its output limit' : ''
    const judged = result.synthesis_error
      ? `judge ${result.judge} failed (${result.synthesis_error_code}): ${result.synthesis_error}`
      : `judge ${result.judge}: ${result.synthesis_prompt_tokens} input tokens, ${result.synthesis_tokens} output tokens${cut}`
    io.err(`[fusion ${result.status}; ${judged}; request id ${requestId}]`)
  }
  if (result.status === 'failed') throw new Error('every participant failed; nothing was synthesized')
  if (result.synthesis === '') throw new Error('the synthesis failed; the answers above were not synthesized')
}
