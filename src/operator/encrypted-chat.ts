import { encryptedChat } from '../client/tee'
import type { ClientConfig } from '../config/client'
import { gatewayUrl, parseOptions, promptArgument, UsageError, type CliIo } from './io'

/**
 * `svc encrypted-chat --model M:encrypted [--key K] [--url U] [--algo ecdsa|ed25519] [--no-stream]
 * [--system S] PROMPT`: one Encrypted chat through a running gateway with the client library:
 * attest with a fresh nonce, refuse unless the evidence binds it and the model key, encrypt,
 * send, decrypt; with --no-stream, refuse a reply the backend's signature does not cover. Said on
 * stderr: whether the reply was authenticated (a stream cannot be), and that the hardware quote
 * chain is not verified.
 */
export async function encryptedChatCommand(client: ClientConfig, args: string[], io: CliIo): Promise<void> {
  const { values, positionals } = parseOptions(
    args,
    { model: { type: 'string' }, key: { type: 'string' }, url: { type: 'string' }, algo: { type: 'string' }, 'no-stream': { type: 'boolean' }, system: { type: 'string' }, json: { type: 'boolean' } },
    ['model'],
    'PROMPT',
  )
  const prompt = promptArgument(positionals)
  const key = values.key ?? client.apiKey
  if (!key) throw new UsageError('an API key is needed: --key or SVC_API_KEY')
  if (!values.model!.endsWith(':encrypted')) throw new UsageError('--model must be an :encrypted model id (GET /v1/models?privacy_tier=encrypted lists them)')
  const algo = values.algo ?? 'ecdsa'
  if (algo !== 'ecdsa' && algo !== 'ed25519') throw new UsageError('--algo must be ecdsa or ed25519')
  const stream = values['no-stream'] !== true
  const messages = [...(values.system ? [{ role: 'system', content: values.system }] : []), { role: 'user', content: prompt }]
  // A write the terminal refused is the command's own error, named as every command names it.
  let unwritten: unknown
  const result = await encryptedChat({
    baseUrl: gatewayUrl(values.url, client.url), apiKey: key, model: values.model!, algo, stream, messages,
    onDelta: values.json
      ? undefined
      : text => {
          try {
            io.write(text)
          } catch (error) {
            unwritten = error
            throw error
          }
        },
  }).catch(error => {
    if (error === unwritten) throw error
    throw new Error(`encrypted chat failed: ${(error as Error).message}`)
  })
  const { attestation } = result
  const reply = result.authenticated
    ? 'reply signed by the attested key over this request and the exact reply bytes'
    : 'streamed reply NOT authenticated: the gateway offers no signature over a stream, so a relay could have altered, dropped or reordered it (--no-stream checks the backend\'s signature)'
  const binding = `${reply}; evidence binds the nonce and model key (${attestation.proof_format}, ${attestation.signing_algo} ${attestation.signing_address}); hardware quote chain NOT verified${result.binding.simulated ? '; SIMULATED evidence' : ''}`
  if (values.json) {
    io.err(`[${binding}]`)
    io.out(JSON.stringify({ content: result.content, reasoning: result.reasoning || undefined, usage: result.usage, authenticated: result.authenticated, binding: { bound: result.binding.bound, simulated: result.binding.simulated, hardware_verified: false }, proof_format: attestation.proof_format, signing_address: attestation.signing_address }))
    return
  }
  if (!stream) io.write(result.content)
  io.write('\n')
  io.err(`[${binding}]`)
  if (result.usage) io.err(`[${result.usage.prompt_tokens} input tokens, ${result.usage.completion_tokens} output tokens]`)
}
