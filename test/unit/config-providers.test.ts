import { describe, expect, test } from 'bun:test'
import { type Env, fileProblems, fromFile, MINIMAL } from '../support/config'

// Providers and models in a config file: every field mapped, and every inconsistency refused by
// its path.

describe('providers and models in a config file', () => {
  const EXAMPLE = `${MINIMAL}providers:
  - { id: vllm-a, type: openai-compatible, base_url: "http://vllm-a:8000/v1/", api_key_env: VLLM_A_KEY,
      retention: none, connect_timeout_ms: 2500, idle_timeout_ms: 90000, response_timeout_ms: 1200000 }
  - { id: claude, type: anthropic, api_key_env: ANTHROPIC_API_KEY }
  - { id: local, type: openai-compatible, base_url: "http://127.0.0.1:8080" }
models:
  - id: llama-3.3-70b
    level: private
    backends:
      - { provider: vllm-a, model: meta-llama/Llama-3.3-70B-Instruct, weight: 3 }
      - { provider: local, model: "llama3.3:70b", uncensored: true }
    routing: round-robin
    price: { input_per_mtok: "0.40", output_per_mtok: "0.80", cached_input_per_mtok: "0.1", reasoning_per_mtok: "1.000000001",
             cache_write_input_per_mtok: "0.45", cache_write_1h_input_per_mtok: "0.800000001" }
    context_length: 131072
    max_output_tokens: 8192
    capabilities: { tools: true, reasoning: false, vision: false, file_input: true, supports_web_fetch: true, supports_web_search: true }
  - id: claude-sonnet
    backends: [{ provider: claude, model: claude-sonnet-4-5 }]
    price: { input_per_mtok: "3", output_per_mtok: "15" }
    context_length: 200000
    max_output_tokens: 64000
`
  // vllm-a is private-capable, local is not: make local retention none for the example to load.
  const LOADABLE = EXAMPLE.replace('base_url: "http://127.0.0.1:8080" }', 'base_url: "http://127.0.0.1:8080", retention: none }')
  const KEYS = { VLLM_A_KEY: 'vllm-secret', ANTHROPIC_API_KEY: 'ant-secret' }

  test('providers: keys read from the named variables, defaults filled, trailing slash dropped', () => {
    const { config } = fromFile(LOADABLE, KEYS)
    expect(config.providers).toEqual([
      { id: 'vllm-a', type: 'openai-compatible', baseUrl: 'http://vllm-a:8000/v1', apiKey: 'vllm-secret', retention: 'none', connectTimeoutMs: 2500, idleTimeoutMs: 90_000, responseTimeoutMs: 1_200_000, chatCompletions: { maxTokensField: 'max_tokens', reasoningHistory: 'drop' } },
      { id: 'claude', type: 'anthropic', baseUrl: 'https://api.anthropic.com/v1', apiKey: 'ant-secret', retention: 'unknown', connectTimeoutMs: 10_000, idleTimeoutMs: 60_000, responseTimeoutMs: 600_000 },
      { id: 'local', type: 'openai-compatible', baseUrl: 'http://127.0.0.1:8080', apiKey: undefined, retention: 'none', connectTimeoutMs: 10_000, idleTimeoutMs: 60_000, responseTimeoutMs: 600_000, chatCompletions: { maxTokensField: 'max_tokens', reasoningHistory: 'drop' } },
    ])
  })

  test('models: every field mapped, money exact, defaults for the omitted ones', () => {
    const { config } = fromFile(LOADABLE, KEYS)
    expect(config.models).toEqual([
      {
        id: 'llama-3.3-70b',
        level: 'private',
        backends: [
          { provider: 'vllm-a', model: 'meta-llama/Llama-3.3-70B-Instruct', weight: 3, uncensored: false },
          { provider: 'local', model: 'llama3.3:70b', weight: 1, uncensored: true },
        ],
        routing: 'round-robin',
        price: {
          inputPerMillion: 400_000_000n,
          outputPerMillion: 800_000_000n,
          cachedInputPerMillion: 100_000_000n,
          cacheWriteInputPerMillion: 450_000_000n,
          cacheWrite1hInputPerMillion: 800_000_001n,
          reasoningPerMillion: 1_000_000_001n,
        },
        contextLength: 131072,
        maxOutputTokens: 8192,
        capabilities: { tools: true, reasoning: false, vision: false, fileInput: true, supportsWebFetch: true, supportsWebSearch: true },
      },
      {
        id: 'claude-sonnet',
        level: 'anonymous',
        backends: [{ provider: 'claude', model: 'claude-sonnet-4-5', weight: 1, uncensored: false }],
        routing: 'ordered',
        price: { inputPerMillion: 3_000_000_000n, outputPerMillion: 15_000_000_000n },
        contextLength: 200_000,
        maxOutputTokens: 64_000,
        capabilities: { tools: false, reasoning: false, vision: false, fileInput: false, supportsWebFetch: false, supportsWebSearch: false },
      },
    ])
    // Absent optional prices stay absent (pricing falls back to the input/output price, or a
    // multiple of the input's for cache writes: test/unit/pricing.test.ts).
    for (const absent of ['cachedInputPerMillion', 'cacheWriteInputPerMillion', 'cacheWrite1hInputPerMillion']) expect(absent in config.models[1]!.price).toBe(false)
  })

  test('a private model whose backend provider keeps data is refused, naming the model and provider', () => {
    const problems = fileProblems(EXAMPLE, KEYS)
    expect(problems).toEqual(['models.0.level: model "llama-3.3-70b" is private but its backend 1 uses provider "local", which does not declare retention: none'])
    // The same model at the anonymous level is fine.
    expect(fromFile(EXAMPLE.replace('level: private', 'level: anonymous'), KEYS).config.models[0]!.level).toBe('anonymous')
  })

  test('a missing key variable is named, with the provider; an empty one counts as missing', () => {
    expect(fileProblems(LOADABLE, { ANTHROPIC_API_KEY: 'x' })).toEqual(['providers.0.api_key_env: provider "vllm-a": environment variable VLLM_A_KEY is not set'])
    expect(fileProblems(LOADABLE, { VLLM_A_KEY: '', ANTHROPIC_API_KEY: '' })).toEqual([
      'providers.0.api_key_env: provider "vllm-a": environment variable VLLM_A_KEY is not set',
      'providers.1.api_key_env: provider "claude": environment variable ANTHROPIC_API_KEY is not set',
    ])
  })

  test('the demo provider needs no key, even when it names a variable', () => {
    const { config } = fromFile(`${MINIMAL}providers:\n  - { id: demo, type: demo, api_key_env: NOT_SET_ANYWHERE }\n`)
    expect(config.providers[0]).toMatchObject({ id: 'demo', apiKey: undefined, retention: 'unknown' })
  })

  const providerProblems = (entry: string, env: Env = {}) => fileProblems(`${MINIMAL}providers:\n  - ${entry}\n`, env)

  test.each([
    ['{ id: a, type: openai-compatible }', 'providers.0.base_url: provider "a": type openai-compatible needs base_url'],
    ['{ id: a, type: demo, base_url: "http://x" }', 'providers.0.base_url: provider "a": the demo provider has no upstream, remove base_url'],
    ['{ id: a, type: anthropic }', 'providers.0.api_key_env: provider "a": type anthropic needs api_key_env (the Anthropic API always takes a key)'],
    ['{ id: a, type: openai-compatible, base_url: "ftp://x" }', 'providers.0.base_url: provider "a": must be an absolute http:// or https:// URL, got "ftp://x"'],
    ['{ id: a, type: openai-compatible, base_url: "vllm:8000" }', 'providers.0.base_url: provider "a": must be an absolute http:// or https:// URL, got "vllm:8000"'],
    ['{ id: a, type: openai-compatible, base_url: "https://u:p@x/v1" }', 'providers.0.base_url: provider "a": must not carry credentials (use api_key_env), got "https://[redacted]@x/v1"'],
    ['{ id: a, type: openai-compatible, base_url: "https://x/v1?key=1" }', 'providers.0.base_url: provider "a": must not have a query or fragment, got "https://x/v1?[redacted]"'],
    ['{ id: a, type: openai-compatible, base_url: "https://x/v1#f" }', 'providers.0.base_url: provider "a": must not have a query or fragment, got "https://x/v1#[redacted]"'],
    ['{ id: a, type: demo, proof_format: x }', 'providers.0.proof_format: provider "a": proof_format applies only to type attested'],
    ['{ id: a, type: demo, retention: never }', 'providers.0.retention: must be one of none, unknown'],
    ['{ id: a, type: ollama }', 'providers.0.type: must be one of openai-compatible, anthropic, demo, attested'],
    ['{ id: A, type: demo }', 'providers.0.id: must be 1 to 64 lower-case letters, digits, dots, underscores or dashes, starting with a letter or digit'],
    ['{ id: a, type: demo, api_key: sk-inline }', 'providers.0.api_key: Unexpected property'],
    ['{ id: a, type: demo, api_key_env: "has space" }', 'providers.0.api_key_env: must be an environment variable name: 1 to 128 letters, digits or underscores, not starting with a digit'],
    ['{ id: a, type: demo, connect_timeout_ms: 50 }', 'providers.0.connect_timeout_ms: Expected integer to be greater or equal to 100'],
    ['{ id: a, type: demo, idle_timeout_ms: 1.5 }', 'providers.0.idle_timeout_ms: Expected integer'],
    ['{ id: a, type: demo, response_timeout_ms: 999 }', 'providers.0.response_timeout_ms: Expected integer to be greater or equal to 1000'],
    ['{ id: a, type: demo, response_timeout_ms: 3600001 }', 'providers.0.response_timeout_ms: Expected integer to be less or equal to 3600000'],
    ['{ id: a, type: demo, response_timeout_ms: "600000" }', 'providers.0.response_timeout_ms: Expected integer'],
  ])('%s is refused', (entry, problem) => {
    expect(providerProblems(entry)).toEqual([problem])
  })

  test('an attested provider loads with its proof_format and signing algorithms', () => {
    const { config } = fromFile(`${MINIMAL}providers:\n  - { id: tee-1, type: attested, base_url: "https://tee-1.example.com/v1", api_key_env: TEE1_KEY, proof_format: dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2, signing_algos: [ecdsa] }\n`, { TEE1_KEY: 'k' })
    expect(config.providers[0]).toMatchObject({ id: 'tee-1', type: 'attested', attested: { proofFormat: { name: 'dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2', binding: 'addr', e2ee: { family: 'nearai', version: 2 } }, signingAlgos: ['ecdsa'] } })
  })

  test.each([
    ['{ id: t, type: attested, base_url: "https://t/v1" }', 'providers.0.proof_format: provider "t": type attested needs proof_format'],
    ['{ id: t, type: attested, base_url: "https://t/v1", proof_format: tdx.v9 }', 'providers.0.proof_format: provider "t": unknown proof_format "tdx.v9"'],
    ['{ id: t, type: attested, proof_format: dstack-tdx-nvgpu.addr-nonce.v1 }', 'providers.0.base_url: provider "t": type attested needs base_url'],
    ['{ id: a, type: demo, signing_algos: [ecdsa] }', 'providers.0.signing_algos: provider "a": signing_algos applies only to type attested'],
    ['{ id: a, type: demo, max_tokens_field: max_tokens }', 'providers.0.max_tokens_field: provider "a": max_tokens_field applies only to type openai-compatible'],
    ['{ id: a, type: demo, reasoning_history: reasoning_content }', 'providers.0.reasoning_history: provider "a": reasoning_history applies only to type openai-compatible'],
    ['{ id: a, type: openai-compatible, base_url: "http://x", reasoning_history: keep }', 'providers.0.reasoning_history: must be one of drop, reasoning_content'],
  ])('%s is refused', (entry, problem) => {
    const problems = providerProblems(entry)
    expect(problems).toHaveLength(1)
    expect(problems[0]).toStartWith(problem)
  })

  test('openai-compatible wire choices: max_completion_tokens by default on api.openai.com only; both can be set', () => {
    const load = (entry: string) => fromFile(`${MINIMAL}providers:\n  - ${entry}\n`, { K: 'k' }).config.providers[0]!.chatCompletions
    expect(load('{ id: a, type: openai-compatible, base_url: "https://api.openai.com/v1", api_key_env: K }')).toEqual({ maxTokensField: 'max_completion_tokens', reasoningHistory: 'drop' })
    expect(load('{ id: a, type: openai-compatible, base_url: "http://vllm:8000/v1" }')).toEqual({ maxTokensField: 'max_tokens', reasoningHistory: 'drop' })
    expect(load('{ id: a, type: openai-compatible, base_url: "https://api.deepseek.com/v1", max_tokens_field: max_completion_tokens, reasoning_history: reasoning_content }')).toEqual({
      maxTokensField: 'max_completion_tokens',
      reasoningHistory: 'reasoning_content',
    })
    expect(load('{ id: a, type: demo }')).toBeUndefined()
  })

  test('duplicate provider ids are refused', () => {
    const problems = fileProblems(`${MINIMAL}providers:\n  - { id: a, type: demo }\n  - { id: b, type: demo }\n  - { id: a, type: demo }\n`)
    expect(problems).toEqual(['providers.2.id: duplicate provider id "a"'])
  })

  const PROVIDERS = `providers:\n  - { id: demo, type: demo, retention: none }\n  - { id: open, type: openai-compatible, base_url: "http://x" }\n  - { id: tee, type: attested, base_url: "http://t/v1", proof_format: dstack-tdx-nvgpu.addr-nonce.e2ee-phala.v1 }\n  - { id: plain-tee, type: attested, base_url: "http://p/v1", proof_format: dstack-tdx-nvgpu.addr-nonce.v1 }\n`
  // A model entry: these defaults, each unless `fields` gives its own (a key may appear once).
  const MODEL_DEFAULTS = { id: 'm', backends: '[{ provider: demo, model: d }]', price: '{ input_per_mtok: "1", output_per_mtok: "2" }', context_length: '1000', max_output_tokens: '100' }
  const model = (fields: string) => {
    const defaults = Object.entries(MODEL_DEFAULTS).filter(([key]) => !fields.includes(`, ${key}:`))
    return `- { ${defaults.map(([key, value]) => `${key}: ${value}`).join(', ')}${fields} }`
  }
  const modelProblems = (...entries: string[]) => fileProblems(`${MINIMAL}${PROVIDERS}models:\n${entries.map(entry => `  ${entry}\n`).join('')}`)
  const loadModels = (...entries: string[]) => fromFile(`${MINIMAL}${PROVIDERS}models:\n${entries.map(entry => `  ${entry}\n`).join('')}`).config.models

  test('a minimal model loads with its defaults', () => {
    expect(loadModels(model(''))[0]).toMatchObject({ id: 'm', level: 'anonymous', routing: 'ordered', backends: [{ provider: 'demo', model: 'd', weight: 1, uncensored: false }] })
  })

  test.each([
    [', level: private', []],
    [', level: private, backends: [{ provider: demo, model: d }, { provider: open, model: o }]', ['models.0.level: model "m" is private but its backend 1 uses provider "open", which does not declare retention: none']],
    [', backends: [{ provider: nope, model: d }]', ['models.0.backends.0.provider: model "m" names unknown provider "nope" (known: demo, open, tee, plain-tee)']],
    [', backends: [{ provider: demo, model: d }, { provider: demo, model: d }]', ['models.0.backends.1: model "m" binds provider "demo" model "d" twice (use weight instead)']],
    [', confidential: [{ provider: tee, model: d }, { provider: tee, model: d }]', ['models.0.confidential.1: model "m" binds provider "tee" model "d" twice (use weight instead)']],
    [', encrypted: [{ provider: tee, model: d }, { provider: tee, model: e }, { provider: tee, model: d }]', ['models.0.encrypted.2: model "m" binds provider "tee" model "d" twice (use weight instead)']],
    [', max_output_tokens: 1001', ['models.0.max_output_tokens: model "m": 1001 exceeds context_length 1000']],
    [', confidential: [{ provider: demo, model: d }]', ['models.0.confidential.0.provider: model "m": the confidential level needs an attested provider, "demo" is demo']],
    [', encrypted: [{ provider: open, model: d }]', ['models.0.encrypted.0.provider: model "m": the encrypted level needs an attested provider, "open" is openai-compatible']],
    [', confidential: [{ provider: tee, model: d }], encrypted: [{ provider: tee, model: d }]', []],
    [', encrypted: [{ provider: plain-tee, model: d }]', ['models.0.encrypted.0.provider: model "m": the encrypted level needs a proof_format with an E2EE protocol, "plain-tee" has dstack-tdx-nvgpu.addr-nonce.v1']],
    [', backends: [{ provider: tee, model: d }]', ['models.0.backends.0.provider: model "m": attested provider "tee" serves only the :confidential and :encrypted levels']],
    [', level: confidential', ['models.0.level: must be one of anonymous, private']],
    [', routing: random', ['models.0.routing: must be one of ordered, round-robin']],
    [', id: "m:confidential"', ['models.0.id: must be 1 to 128 letters, digits, dots, underscores, slashes or dashes, starting with a letter or digit (a level suffix such as :confidential is not part of the id)']],
    [', backends: []', ['models.0.backends: Expected array length to be greater or equal to 1']],
    [', backends: [{ provider: demo, model: d, weight: 0 }]', ['models.0.backends.0.weight: Expected integer to be greater or equal to 1']],
    // QA: a weight under ordered routing was silently ignored.
    [', backends: [{ provider: demo, model: d, weight: 5 }, { provider: open, model: o }]', ['models.0.backends.0.weight: model "m": weight applies to routing: round-robin only (this model\'s routing is ordered: strict failover)']],
    [', routing: ordered, confidential: [{ provider: tee, model: d, weight: 1 }]', ['models.0.confidential.0.weight: model "m": weight applies to routing: round-robin only (this model\'s routing is ordered: strict failover)']],
    [', routing: round-robin, backends: [{ provider: demo, model: d, weight: 5 }, { provider: open, model: o }]', []],
    // QA: GET /v1/models/{id} could not retrieve these with the slash raw ("u/.." answered the list).
    ...['t/', 'u/..', 'v/./z', 'a//b'].map(id => [`, id: "${id}"`, [`models.0.id: model "${id}": an id may not have an empty, "." or ".." segment between its slashes, or end in a slash`]] as [string, string[]]),
    [', id: "org/model-1.5"', []],
    [', backends: [{ provider: demo, model: "has space" }]', ['models.0.backends.0.model: must be 1 to 256 characters without spaces']],
    [', backends: [{ provider: demo, model: 42 }]', ['models.0.backends.0.model: Expected string']],
    [', backends: [{ provider: demo, model: d, region: eu }]', ['models.0.backends.0.region: Unexpected property']],
    [', backends: [{ provider: demo, model: d, thinking: auto }]', ['models.0.backends.0.thinking: must be one of budget, adaptive']],
    [', backends: [{ provider: open, model: o, thinking: adaptive }]', ['models.0.backends.0.thinking: model "m": thinking applies to anthropic providers only, "open" is openai-compatible']],
    [', confidential: [{ provider: tee, model: d, thinking: budget }]', ['models.0.confidential.0.thinking: model "m": thinking applies to anthropic providers only, "tee" is attested']],
    [', price: { input_per_mtok: 1, output_per_mtok: "2" }', ['models.0.price.input_per_mtok: Expected string (write money as a quoted decimal string)']],
    [', price: { input_per_mtok: "1", output_per_mtok: "9223372037" }', ['models.0.price.output_per_mtok: amount too large']],
    [', price: { input_per_mtok: "1", output_per_mtok: "2", cache_write_per_mtok: "3" }', ['models.0.price.cache_write_per_mtok: Unexpected property']],
    [', price: { input_per_mtok: "1", output_per_mtok: "2", cache_write_input_per_mtok: 1.25 }', ['models.0.price.cache_write_input_per_mtok: Expected string (write money as a quoted decimal string)']],
    [', price: { input_per_mtok: "1", output_per_mtok: "2", cache_write_1h_input_per_mtok: "-2" }', ['models.0.price.cache_write_1h_input_per_mtok: must be a decimal USD amount with at most 9 decimals, e.g. "20" or "0.40"']],
    [', price: { input_per_mtok: "1", output_per_mtok: "2", cache_write_1h_input_per_mtok: "9223372037" }', ['models.0.price.cache_write_1h_input_per_mtok: amount too large']],
    [', price: { input_per_mtok: "1", output_per_mtok: "2", cache_write_input_per_mtok: "1.25", cache_write_1h_input_per_mtok: "2" }', []],
    // QA: an input price past half the largest amount made the default 1-hour write price (2×) exceed int64 in /api/v1/models.
    [', price: { input_per_mtok: "4611686018.427387904", output_per_mtok: "2" }', ['models.0.price.input_per_mtok: amount too large for the default cache_write_1h_input_per_mtok (2× the input price); set cache_write_1h_input_per_mtok']],
    [', price: { input_per_mtok: "4611686018.427387903", output_per_mtok: "2" }', []],
    [', price: { input_per_mtok: "4611686018.427387904", output_per_mtok: "2", cache_write_1h_input_per_mtok: "1" }', []],
    [
      ', price: { input_per_mtok: "9223372036.854775807", output_per_mtok: "2" }',
      ['models.0.price.input_per_mtok: amount too large for the default cache_write_input_per_mtok (1.25× the input price); set cache_write_input_per_mtok', 'models.0.price.input_per_mtok: amount too large for the default cache_write_1h_input_per_mtok (2× the input price); set cache_write_1h_input_per_mtok'],
    ],
    [', capabilities: { tools: true, streaming: true }', ['models.0.capabilities.streaming: Unexpected property']],
    [', capabilities: { tools: "yes" }', ['models.0.capabilities.tools: Expected boolean']],
    [', context_length: 0', ['models.0.context_length: Expected integer to be greater or equal to 1']],
    [', pricing: {}', ['models.0.pricing: Unexpected property']],
  ])('model%s → %p', (fields, expected) => {
    if (expected.length === 0) expect(loadModels(model(fields))).toHaveLength(1)
    else expect(modelProblems(model(fields))).toEqual(expected)
  })

  test('an anthropic backend states its thinking form; unset, none (the client\'s form is sent)', () => {
    const providers = `providers:\n  - { id: claude, type: anthropic, api_key_env: ANTHROPIC_API_KEY }\n`
    const backends = '[{ provider: claude, model: claude-opus-4-7, thinking: adaptive }, { provider: claude, model: claude-sonnet-4-5 }]'
    const entry = `- { id: m, backends: ${backends}, price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 1000, max_output_tokens: 100 }`
    const { config } = fromFile(`${MINIMAL}${providers}models:\n  ${entry}\n`, { ANTHROPIC_API_KEY: 'ant-secret' })
    expect(config.models[0]!.backends.map(backend => [backend.model, backend.thinking])).toEqual([['claude-opus-4-7', 'adaptive'], ['claude-sonnet-4-5', undefined]])
  })

  test('a required model field missing is named', () => {
    expect(modelProblems('- { id: m, backends: [{ provider: demo, model: d }], context_length: 1, max_output_tokens: 1 }')).toContain(
      'models.0.price: Expected required property',
    )
  })

  test('duplicate model ids are refused', () => {
    expect(modelProblems(model(''), model(', level: private'))).toEqual(['models.1.id: duplicate model id "m"'])
  })

  test('every provider and model problem is reported at once', () => {
    const problems = fileProblems(
      `${MINIMAL}providers:\n  - { id: a, type: openai-compatible, api_key_env: MISSING_KEY }\n  - { id: a, type: demo }\nmodels:\n  ${model(', backends: [{ provider: zz, model: d }]')}\n  ${model(', max_output_tokens: 5000')}\n`,
    )
    expect(problems).toEqual([
      'providers.0.base_url: provider "a": type openai-compatible needs base_url',
      'providers.0.api_key_env: provider "a": environment variable MISSING_KEY is not set',
      'providers.1.id: duplicate provider id "a"',
      'models.0.backends.0.provider: model "m" names unknown provider "zz" (known: a)',
      'models.1.id: duplicate model id "m"',
      'models.1.backends.0.provider: model "m" names unknown provider "demo" (known: a)',
      'models.1.max_output_tokens: model "m": 5000 exceeds context_length 1000',
    ])
  })
})
