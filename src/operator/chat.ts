import type { ClientConfig } from '../config/client'
import { decodeSse } from '../http/sse'
import { gatewayUrl, parseOptions, promptArgument, UsageError, type CliIo } from './io'
import { readLogin, storedToken } from './login'
import { displayUrl } from '../observability/logger'

/**
 * The gateway and credential of `svc chat` and `svc fusion`: --key, else SVC_API_KEY, else the
 * token of `svc login`, sent only to the gateway it signed in to: a --url or SVC_URL naming
 * another is refused (QA: --url handed the token to any host, and SVC_URL was ignored).
 */
export async function gatewayCredential(client: ClientConfig, values: { key?: string; url?: string }): Promise<{ key: string; url: string }> {
  const key = values.key ?? client.apiKey
  if (key) return { key, url: gatewayUrl(values.url, client.url) }
  const asked = values.url !== undefined || client.urlFromEnv ? gatewayUrl(values.url, client.url) : undefined
  // Checked before the token is used at all (an expired one is refreshed at its gateway first).
  const signedIn = readLogin(client)?.url
  if (asked !== undefined && signedIn !== undefined && URL.parse(asked)?.origin !== URL.parse(signedIn)?.origin) {
    const shown = displayUrl(asked)
    throw new Error(`the svc login token is for ${displayUrl(signedIn)}, not ${shown}: sign in there (svc login --url ${shown}) or pass --key`)
  }
  const stored = await storedToken(client)
  if (!stored) throw new UsageError('an API key is needed: --key, SVC_API_KEY, or sign in with svc login')
  return { key: stored.token, url: asked ?? gatewayUrl(undefined, stored.url, 'the URL svc login stored') }
}

/**
 * `svc chat --model M [--key K] [--url U] [--system S] PROMPT`: streams one answer through a
 * running gateway, a quick smoke test for operators. The key defaults to SVC_API_KEY and the
 * URL to SVC_URL (else this instance's port on localhost); without either key, the token of
 * `svc login` and its gateway. It talks HTTP only: no database.
 */
export async function chat(client: ClientConfig, args: string[], io: CliIo): Promise<void> {
  const { values, positionals } = parseOptions(args, { model: { type: 'string' }, key: { type: 'string' }, url: { type: 'string' }, system: { type: 'string' }, json: { type: 'boolean' } }, ['model'], 'PROMPT')
  const prompt = promptArgument(positionals)
  const { key, url } = await gatewayCredential(client, values)
  const messages = [...(values.system ? [{ role: 'system', content: values.system }] : []), { role: 'user', content: prompt }]
  let response: Response
  try {
    response = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: values.model, messages, stream: true, stream_options: { include_usage: true } }),
    })
  } catch (error) {
    throw new Error(`cannot reach the gateway at ${displayUrl(url)}: ${(error as Error).message}`)
  }
  if (!response.ok || !response.body) {
    const body = (await response.json().catch(() => ({}))) as { error?: { message?: string } }
    throw new Error(`HTTP ${response.status}: ${body.error?.message ?? response.statusText}`)
  }
  let usage: { prompt_tokens: number; completion_tokens: number } | undefined
  // --json: one object at the end (as fusion and encrypted-chat print), no streamed text.
  let content = ''
  // A stream that closes before a finish_reason or [DONE] was cut (a proxy's timeout, a dropped
  // connection): what arrived is not the whole answer.
  let ended = false
  for await (const event of decodeSse(response.body)) {
    if (event.data === '[DONE]') {
      ended = true
      break
    }
    const chunk = JSON.parse(event.data) as {
      error?: { message: string }
      choices?: Array<{ delta?: { content?: string | null; reasoning_content?: string | null }; finish_reason?: string | null }>
      usage?: { prompt_tokens: number; completion_tokens: number }
    }
    if (chunk.error) throw new Error(`the stream failed: ${chunk.error.message}`)
    if (chunk.choices?.[0]?.finish_reason) ended = true
    const delta = chunk.choices?.[0]?.delta
    if (delta?.content) {
      if (values.json) content += delta.content
      else io.write(delta.content)
    }
    if (chunk.usage) usage = chunk.usage
  }
  if (!ended) throw new Error('the answer was cut: the gateway closed the stream before its end (no finish_reason or [DONE])')
  if (values.json) {
    io.out(JSON.stringify({ model: values.model, content, usage }))
    return
  }
  io.write('\n')
  if (usage) io.err(`[${usage.prompt_tokens} input tokens, ${usage.completion_tokens} output tokens]`)
}
