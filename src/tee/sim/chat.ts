// The simulated backend's chat (TEE-PROTOCOL.md B5 steps 1, 4–9): a deterministic echo model,
// the reply encrypted per family, version and algorithm, streamed or not, and signed over the
// exact bytes sent.

import { sha256 } from '@noble/hashes/sha2.js'
import { bytesToHex, isHex } from '../keys'
import { signText } from '../signature'
import { decryptRequest, E2eeRefusal, parseE2ee, ReplyEncryptor } from './e2ee'
import type { SeenChat, SimFaults, SimKeys, SimOptions } from './types'

const utf8 = new TextEncoder()
const tokens = (text: string) => Math.ceil(utf8.encode(text).length / 4)

export interface ChatDeps {
  family: 'nearai' | 'phala'
  modelName: string
  keys: () => SimKeys
  faults: () => SimFaults
  options: SimOptions
  now: () => number
  seen: SeenChat[]
  signatures: Map<string, { text: string; ed25519: string; ecdsa: string; addresses: { ed25519: string; ecdsa: string } }>
  replay: Map<string, number>
  counter: { value: number }
  addresses: () => { ed25519: string; ecdsa: string }
}

function refusal(family: 'nearai' | 'phala', type: string, message: string, status = 400): Response {
  const body = family === 'nearai' ? { error: { message, type: 'bad_request' } } : { error: { message, type } }
  return Response.json(body, { status })
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content
  if (Array.isArray(content)) return content.map(part => (part?.type === 'text' ? String(part.text) : '')).join('')
  return ''
}

export async function handleChat(deps: ChatDeps, request: Request): Promise<Response> {
  const raw = new Uint8Array(await request.arrayBuffer())
  const hashHeader = request.headers.get('x-request-hash')
  const requestHash = hashHeader !== null && isHex(hashHeader, 32) ? hashHeader.toLowerCase() : bytesToHex(sha256(raw))
  let body: Record<string, any>
  try {
    body = JSON.parse(new TextDecoder().decode(raw))
  } catch {
    return refusal(deps.family, 'invalid_request', 'body is not JSON')
  }
  if (body.model !== deps.modelName) return Response.json({ error: { message: `model ${String(body.model)} not found`, type: 'NotFoundError' } }, { status: 404 })
  const headers: Record<string, string> = {}
  request.headers.forEach((value, name) => {
    if (name.startsWith('x-')) headers[name] = value
  })
  const nowSec = Math.floor(deps.now() / 1000)
  let encryptor: ReplyEncryptor | undefined
  let e2eeNonceKey: string | undefined
  try {
    const e2ee = parseE2ee(deps.family, request.headers, deps.keys(), nowSec, deps.options.replayWindowSec ?? 300)
    if (e2ee) {
      if (deps.family === 'phala' && Array.isArray(body.tools) && body.tools.length > 0) throw new E2eeRefusal('invalid_e2ee_request', 'encrypted tools are not supported')
      if (e2ee.nonce !== undefined) {
        e2eeNonceKey = `${e2ee.algo}|${e2ee.timestamp}|${e2ee.nonce}`
        if (deps.replay.has(e2eeNonceKey)) throw new E2eeRefusal('e2ee_replay_detected', 'replayed request')
      }
      decryptRequest(body, e2ee)
      // Claimed only after a successful decrypt, as Phala does.
      if (e2eeNonceKey !== undefined) {
        // Claims older than the window can never be replayed (the timestamp check refuses them): forget them.
        const window = deps.options.replayWindowSec ?? 300
        for (const [claim, at] of deps.replay) if (nowSec - at > 2 * window) deps.replay.delete(claim)
        deps.replay.set(e2eeNonceKey, nowSec)
      }
      encryptor = new ReplyEncryptor(e2ee, deps.options.nearV1ResponseCipher ?? 'xsalsa')
    }
  } catch (error) {
    if (error instanceof E2eeRefusal) return refusal(deps.family, error.type, error.message)
    throw error
  }

  // As vLLM behind the proxy: a truthy (Python) stream_options needs stream: true.
  const streamOptions = body.stream_options
  if (body.stream !== true && streamOptions !== null && typeof streamOptions === 'object' && Object.keys(streamOptions).length > 0) {
    return refusal(deps.family, 'BadRequestError', 'Stream options can only be defined when `stream=True`.')
  }
  const messages: any[] = body.messages ?? []
  const lastUser = [...messages].reverse().find(message => message.role === 'user')
  const userText = textOf(lastUser?.content)
  const tools: any[] = Array.isArray(body.tools) ? body.tools : []
  const last = messages[messages.length - 1]
  const toolCall = tools.length > 0 && last?.role !== 'tool' ? { name: String(tools[0].function?.name), arguments: JSON.stringify({ q: userText }) } : undefined
  const blank = deps.faults().blankAnswer === true
  const content = toolCall || blank ? '' : `echo: ${userText}`
  const reasoning = deps.options.reasoning ? `thinking about: ${userText}` : undefined
  const replyPlain = { content, ...(reasoning !== undefined ? { reasoning } : {}), ...(toolCall ? { toolCall } : {}) }
  deps.seen.push({ encrypted: encryptor !== undefined, headers, rawBody: new TextDecoder().decode(raw), plain: body, replyPlain })

  const id = `chatcmpl-sim-${++deps.counter.value}`
  const model = String(body.model)
  const created = nowSec
  const promptTokens = tokens(messages.map(message => textOf(message.content)).join(''))
  const completionTokens = tokens(content + (reasoning ?? '') + (toolCall?.arguments ?? ''))
  const usage = { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens }
  const enc = (text: string, field: string) => (encryptor ? encryptor.field(text, { id, model, choice: 0, field }) : text)
  const reasoningField = deps.options.reasoningField ?? 'reasoning_content'
  // Phala encrypts content and reasoning_content only (TEE-PROTOCOL.md A2).
  const encReasoning = (text: string) => (deps.family === 'phala' && reasoningField === 'reasoning' ? text : enc(text, reasoningField))
  const encTool = (text: string) => (encryptor && encryptor.allFields ? enc(text, 'tool_calls') : text)
  const finishReason = toolCall ? 'tool_calls' : 'stop'
  const responseHeaders: Record<string, string> = {}
  if (deps.family === 'phala') {
    responseHeaders['x-e2ee-applied'] = String(encryptor !== undefined)
    if (encryptor) {
      responseHeaders['x-e2ee-version'] = request.headers.get('x-e2ee-version') ?? (request.headers.get('x-e2ee-nonce') ? '2' : '1')
      responseHeaders['x-e2ee-algo'] = request.headers.get('x-signing-algo')!.toLowerCase()
    }
  }
  const sign = (responseHash: string) => {
    if (deps.faults().dropSignature) return
    const text = deps.family === 'nearai' ? `${deps.modelName}:${requestHash}:${responseHash}` : `${requestHash}:${responseHash}`
    const keys = deps.keys()
    deps.signatures.set(id, { text, ed25519: signText('ed25519', text, keys.ed25519.secretKey), ecdsa: signText('ecdsa', text, keys.ecdsa.secretKey), addresses: deps.addresses() })
  }

  if (deps.faults().emptyAnswer === true) {
    const bytes = utf8.encode(body.stream === true ? 'data: [DONE]\n\n' : '{}')
    return new Response(bytes, { headers: { 'content-type': body.stream === true ? 'text/event-stream' : 'application/json', ...responseHeaders } })
  }
  // A streamed call answered as if it were not (some servers ignore `stream`).
  if (body.stream !== true || deps.faults().jsonForStream === true) {
    const message: Record<string, unknown> = { role: 'assistant', content: toolCall ? null : enc(content, 'content') }
    if (reasoning !== undefined) message[reasoningField] = encReasoning(reasoning)
    if (toolCall) message.tool_calls = [{ id: `call_sim_${deps.counter.value}`, type: 'function', function: { name: encTool(toolCall.name), arguments: encTool(toolCall.arguments) } }]
    const bytes = utf8.encode(JSON.stringify({ id, object: 'chat.completion', created, model, choices: [{ index: 0, message, finish_reason: finishReason }], ...(blank ? {} : { usage }) }))
    sign(bytesToHex(sha256(bytes)))
    return new Response(bytes, { headers: { 'content-type': 'application/json', ...responseHeaders } })
  }

  const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
    `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`
  const frames: string[] = []
  frames.push(chunk(deps.family === 'phala' ? { role: 'assistant' } : { role: 'assistant', content: '' }))
  if (reasoning !== undefined) frames.push(chunk({ [reasoningField]: encReasoning(reasoning) }))
  if (toolCall) {
    const half = Math.ceil(toolCall.arguments.length / 2)
    frames.push(chunk({ tool_calls: [{ index: 0, id: `call_sim_${deps.counter.value}`, type: 'function', function: { name: encTool(toolCall.name), arguments: encTool(toolCall.arguments.slice(0, half)) } }] }))
    frames.push(chunk({ tool_calls: [{ index: 0, function: { arguments: encTool(toolCall.arguments.slice(half)) } }] }))
  } else {
    const size = Math.max(1, Math.ceil(content.length / 4))
    for (let start = 0; start < content.length; start += size) frames.push(chunk({ content: enc(content.slice(start, start + size), 'content') }))
  }
  frames.push(chunk({}, finishReason))
  if (body.stream_options?.include_usage === true && !blank) frames.push(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices: [], usage })}\n\n`)
  frames.push('data: [DONE]\n\n')
  const abort = deps.faults().abortStream === true
  const hash = sha256.create()
  let index = 0
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (abort && index >= 2) {
        controller.close()
        return
      }
      const bytes = utf8.encode(frames[index++]!)
      hash.update(bytes)
      controller.enqueue(bytes)
      if (index === frames.length) {
        // Signed only after a clean [DONE], over every byte sent.
        sign(bytesToHex(hash.digest()))
        controller.close()
      }
    },
  })
  return new Response(stream, { headers: { ...(deps.faults().noContentType === true ? {} : { 'content-type': 'text/event-stream' }), ...responseHeaders } })
}
