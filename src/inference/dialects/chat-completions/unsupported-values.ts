// The values of Chat Completions fields the gateway cannot honour: the plain route's rules, which
// an Encrypted body's plaintext fields follow too. Dependency-free, so the client library
// (src/client) can hold a body to the same rules before it sends anything in plaintext.

/** A refused value: the field to name and why. */
export interface Refusal {
  readonly param: string
  readonly message: string
}

const refusal = (param: string, message: string): Refusal => ({ param, message })

/**
 * The first field whose value the gateway refuses, or undefined. It takes unchecked JSON (the
 * client calls it on what the caller built): a value of the wrong type is the schema's to refuse,
 * but any value that is not one the gateway accepts is refused here, whatever its type.
 */
export function unsupportedValue(body: Readonly<Record<string, unknown>>): Refusal | undefined {
  if (body.store) return refusal('store', 'store is not supported: the gateway keeps no completions')
  if (body.logprobs) return refusal('logprobs', 'logprobs are not supported')
  if (body.presence_penalty) return refusal('presence_penalty', 'presence_penalty is not supported (only 0)')
  if (body.frequency_penalty) return refusal('frequency_penalty', 'frequency_penalty is not supported (only 0)')
  if (body.top_logprobs) return refusal('top_logprobs', 'logprobs are not supported')
  if (body.service_tier != null && body.service_tier !== 'auto' && body.service_tier !== 'default') {
    return refusal('service_tier', `service_tier ${JSON.stringify(body.service_tier).slice(0, 60)} is not supported (auto or default)`)
  }
  if (body.verbosity != null && body.verbosity !== 'medium') return refusal('verbosity', `verbosity ${JSON.stringify(body.verbosity).slice(0, 60)} is not supported (only medium)`)
  if (body.modalities != null && (!Array.isArray(body.modalities) || body.modalities.some(modality => modality !== 'text'))) {
    return refusal('modalities', 'audio output is not supported (modalities: ["text"])')
  }
  if (body.logit_bias && Object.keys(body.logit_bias).length > 0) return refusal('logit_bias', 'logit_bias is not supported (only {} or null)')
  if (body.prediction) return refusal('prediction', 'prediction is not supported: predicted outputs are not available on this API')
  if (body.audio) return refusal('audio', 'audio output is not supported (audio must be null)')
  return undefined
}

export const REQUIRED_WITHOUT_TOOLS = refusal('tool_choice', 'tool_choice "required" needs at least one function tool')
