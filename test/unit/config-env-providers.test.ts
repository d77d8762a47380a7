import { describe, expect, test } from 'bun:test'
import { Value } from '@sinclair/typebox/value'
import { ENV_PROVIDERS, withEnvProviders } from '../../src/config/env-providers'
import { loadConfig } from '../../src/config/load'
import { FileConfigSchema } from '../../src/config/schema'
import { type Env, fromFile, MINIMAL, noFile, problemsOf } from '../support/config'

// Providers and models without a config file: the embedded demo, and the upstreams added from
// OPENAI_API_KEY, ANTHROPIC_API_KEY and OLLAMA_BASE_URL.

describe('providers and models: embedded default', () => {
  test('the demo provider, with no upstream and no key', () => {
    const config = loadConfig({}, noFile)
    expect(config.providers).toEqual([
      { id: 'demo', type: 'demo', baseUrl: undefined, apiKey: undefined, retention: 'none', connectTimeoutMs: 10_000, idleTimeoutMs: 60_000, responseTimeoutMs: 600_000 },
    ])
  })

  test('demo-anonymous, demo-private and demo-alt, with tools and reasoning, small prices; demo-private judges Fusion', () => {
    const config = loadConfig({}, noFile)
    expect(config.models.map(model => [model.id, model.level])).toEqual([
      ['demo-anonymous', 'anonymous'],
      ['demo-private', 'private'],
      ['demo-alt', 'anonymous'],
    ])
    expect(config.fusion).toEqual({ judge: 'demo-private', participantTimeoutMs: 120_000, judgeTimeoutMs: 120_000 })
    for (const model of config.models) {
      expect(model.backends).toEqual([{ provider: 'demo', model: 'demo', weight: 1, uncensored: false }])
      expect(model.routing).toBe('ordered')
      expect(model.price).toEqual({ inputPerMillion: 100_000_000n, outputPerMillion: 400_000_000n })
      expect(model.contextLength).toBe(32768)
      expect(model.maxOutputTokens).toBe(4096)
      expect(model.capabilities).toEqual({ tools: true, reasoning: true, vision: false, fileInput: false, supportsWebFetch: false, supportsWebSearch: false })
    }
  })

  test('providers and models are frozen all the way down', () => {
    const config = loadConfig({}, noFile)
    for (const value of [config.providers, config.providers[0], config.models, config.models[0], config.models[0]!.backends, config.models[0]!.backends[0], config.models[0]!.price, config.models[0]!.capabilities]) {
      expect(Object.isFrozen(value)).toBe(true)
    }
  })
})

describe('providers from the environment (no SVC_CONFIG)', () => {
  const ids = (env: Env) => {
    const config = loadConfig(env, noFile)
    return { providers: config.providers.map(provider => provider.id), models: config.models.map(model => model.id) }
  }

  test('OPENAI_API_KEY adds openai with its key and a short model list', () => {
    const config = loadConfig({ OPENAI_API_KEY: 'sk-test' }, noFile)
    expect(config.providers[1]).toEqual({
      id: 'openai',
      type: 'openai-compatible',
      baseUrl: 'https://api.openai.com/v1',
      apiKey: 'sk-test',
      retention: 'unknown',
      connectTimeoutMs: 10_000,
      idleTimeoutMs: 60_000,
      responseTimeoutMs: 600_000,
      chatCompletions: { maxTokensField: 'max_completion_tokens', reasoningHistory: 'drop' },
    })
    const mini = config.models.find(model => model.id === 'gpt-4o-mini')!
    expect(mini.level).toBe('anonymous')
    expect(mini.backends).toEqual([{ provider: 'openai', model: 'gpt-4o-mini', weight: 1, uncensored: false }])
    expect(mini.price).toEqual({ inputPerMillion: 150_000_000n, outputPerMillion: 600_000_000n, cachedInputPerMillion: 75_000_000n })
    expect(config.models.every(model => model.id.startsWith('demo-') || model.backends[0]!.provider === 'openai')).toBe(true)
  })

  test('ANTHROPIC_API_KEY adds anthropic', () => {
    const config = loadConfig({ ANTHROPIC_API_KEY: 'sk-ant' }, noFile)
    expect(config.providers.map(provider => [provider.id, provider.type, provider.baseUrl, provider.apiKey, provider.retention])).toEqual([
      ['demo', 'demo', undefined, undefined, 'none'],
      ['anthropic', 'anthropic', 'https://api.anthropic.com/v1', 'sk-ant', 'unknown'],
    ])
    const sonnet = config.models.find(model => model.id === 'claude-sonnet-4-5')!
    expect(sonnet.level).toBe('anonymous')
    expect(sonnet.capabilities.reasoning).toBe(true)
    expect(sonnet.backends[0]!.provider).toBe('anthropic')
  })

  test.each([
    ['http://localhost:11434', 'http://localhost:11434/v1'],
    ['http://localhost:11434/', 'http://localhost:11434/v1'],
    ['http://gpu-box:11434/v1', 'http://gpu-box:11434/v1'],
    ['https://ollama.internal/base', 'https://ollama.internal/base/v1'],
  ])('OLLAMA_BASE_URL %p adds ollama at %p, private, without a key', (raw, base) => {
    const config = loadConfig({ OLLAMA_BASE_URL: raw }, noFile)
    expect(config.providers[1]).toMatchObject({ id: 'ollama', type: 'openai-compatible', baseUrl: base, apiKey: undefined, retention: 'none' })
    const llama = config.models.find(model => model.id === 'llama3.2')!
    expect(llama.level).toBe('private')
    expect(llama.backends).toEqual([{ provider: 'ollama', model: 'llama3.2', weight: 1, uncensored: false }])
    expect(llama.price).toEqual({ inputPerMillion: 0n, outputPerMillion: 0n })
  })

  test.each(['localhost:11434', 'ftp://host', 'http://user:pass@host:11434', 'http://host:11434/?x=1', 'not a url'])('OLLAMA_BASE_URL %p is refused by name', raw => {
    const problems = problemsOf(() => loadConfig({ OLLAMA_BASE_URL: raw }, noFile))
    expect(problems).toHaveLength(1)
    expect(problems[0]).toStartWith('OLLAMA_BASE_URL: ')
    // A URL's credentials, query and fragment are cut from the echo (config-secrets.test.ts).
    expect(problems[0]).toContain(raw.replace('user:pass@', '[redacted]@').replace('?x=1', '?[redacted]'))
  })

  test('all three together, in table order; empty values add nothing', () => {
    expect(ids({ OPENAI_API_KEY: 'a', ANTHROPIC_API_KEY: 'b', OLLAMA_BASE_URL: 'http://127.0.0.1:11434' }).providers).toEqual(['demo', 'openai', 'anthropic', 'ollama'])
    expect(ids({ OPENAI_API_KEY: '', ANTHROPIC_API_KEY: '', OLLAMA_BASE_URL: '' })).toEqual({ providers: ['demo'], models: ['demo-anonymous', 'demo-private', 'demo-alt'] })
  })

  test('the table rows pass the config file schema, as if an operator had written them', () => {
    const problems: string[] = []
    const file = withEnvProviders({ plans: { p: { monthly_allowance: '0', fusion: false } } }, name => (name === 'OLLAMA_BASE_URL' ? 'http://h:1' : 'x'), problems)
    expect(problems).toEqual([])
    expect(file.providers).toHaveLength(ENV_PROVIDERS.length)
    expect([...Value.Errors(FileConfigSchema, file)].map(error => `${error.path}: ${error.message}`)).toEqual([])
  })

  test('a config file is not extended from the environment', () => {
    const { config } = fromFile(MINIMAL, { OPENAI_API_KEY: 'sk', ANTHROPIC_API_KEY: 'sk', OLLAMA_BASE_URL: 'http://x:1' })
    expect(config.providers).toEqual([])
    expect(config.models).toEqual([])
  })
})
