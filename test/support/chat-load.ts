// A client load for the operations tests: workers send Chat Completions requests (streamed,
// collected, and invalid ones that must fail before the upstream) with their own X-Request-Id,
// and record what the client saw. "Complete" means the whole answer arrived: a stream's finish
// chunk and [DONE] with no error frame, or a 200 chat.completion.

/** What the client saw of one request. */
export interface ChatOutcome {
  readonly id: string
  readonly kind: 'stream' | 'plain' | 'invalid'
  /** Which gateway it was sent to (several-instance tests). */
  readonly target: number
  complete: boolean
  status: number | undefined
}

export interface ChatLoadOptions {
  /** Gateway base URLs; requests rotate over them. */
  readonly urls: readonly string[]
  readonly key: string
  readonly workers: number
  /** Keep going while this holds. */
  readonly running: () => boolean
  /** Prefix of the request ids (unique per test round). */
  readonly prefix: string
  /** Share of invalid requests (default 0.1). */
  readonly invalidShare?: number
  /** Stop after this many requests per worker (default: unbounded). */
  readonly perWorker?: number
}

export async function chatLoad(options: ChatLoadOptions): Promise<ChatOutcome[]> {
  const outcomes: ChatOutcome[] = []
  let counter = 0
  const worker = async (workerIndex: number) => {
    for (let sent = 0; options.running() && sent < (options.perWorker ?? Infinity); sent++) {
      const index = counter++
      const roll = Math.random()
      const kind: ChatOutcome['kind'] = roll < (options.invalidShare ?? 0.1) ? 'invalid' : roll < 0.55 ? 'stream' : 'plain'
      const target = (workerIndex + sent) % options.urls.length
      const outcome: ChatOutcome = { id: `${options.prefix}-${index}`, kind, target, complete: false, status: undefined }
      outcomes.push(outcome)
      try {
        const response = await fetch(`${options.urls[target]}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${options.key}`, 'content-type': 'application/json', 'x-request-id': outcome.id },
          body: JSON.stringify({
            model: kind === 'invalid' ? 'no-such-model' : 'm',
            stream: kind === 'stream',
            messages: [{ role: 'user', content: `request ${outcome.id}` }],
          }),
        })
        outcome.status = response.status
        if (kind === 'stream') {
          const text = await response.text()
          outcome.complete = response.status === 200 && text.includes('"finish_reason":"stop"') && text.trimEnd().endsWith('data: [DONE]') && !text.includes('"error"')
        } else {
          const body = (await response.json()) as { choices?: unknown[] }
          outcome.complete = response.status === 200 && Array.isArray(body.choices)
        }
      } catch {
        // Connection refused or reset: the client saw no complete answer.
        if (!options.running()) return
      }
    }
  }
  await Promise.all(Array.from({ length: options.workers }, (_, index) => worker(index)))
  return outcomes
}
