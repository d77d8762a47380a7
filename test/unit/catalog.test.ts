import { describe, expect, test } from 'bun:test'
import { Catalog, PRIVACY_LEVELS } from '../../src/catalog/catalog'
import type { ModelConfig } from '../../src/config/config'
import { loadConfig } from '../../src/config/load'
import { ApiError } from '../../src/http/errors'

const CAPABILITIES = { tools: true, reasoning: false, vision: true, fileInput: false, supportsWebFetch: true, supportsWebSearch: false }

function model(id: string, level: 'anonymous' | 'private', overrides: Partial<ModelConfig> = {}): ModelConfig {
  return {
    id,
    level,
    backends: [{ provider: 'p', model: `${id}-upstream`, weight: 1, uncensored: false }],
    routing: 'ordered',
    price: { inputPerMillion: 1n, outputPerMillion: 2n },
    contextLength: 1000,
    maxOutputTokens: 100,
    capabilities: CAPABILITIES,
    ...overrides,
  }
}

const MODELS = [
  model('alpha', 'anonymous', { routing: 'round-robin', price: { inputPerMillion: 5n, outputPerMillion: 7n, cachedInputPerMillion: 1n } }),
  model('beta', 'private', { contextLength: 8192, maxOutputTokens: 512 }),
  model('gamma', 'anonymous'),
]

/** The ApiError `run` throws (fails the test when it returns). */
function errorOf(run: () => unknown): ApiError {
  try {
    run()
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError)
    return error as ApiError
  }
  throw new Error('expected an ApiError')
}

describe('Catalog.resolve', () => {
  const catalog = new Catalog({ models: MODELS })

  test('an unsuffixed id is the model at its own level, with everything the pipeline needs', () => {
    expect(catalog.resolve('alpha')).toEqual({
      id: 'alpha',
      modelId: 'alpha',
      level: 'anonymous',
      backends: [{ provider: 'p', model: 'alpha-upstream', weight: 1, uncensored: false }],
      routing: 'round-robin',
      price: { inputPerMillion: 5n, outputPerMillion: 7n, cachedInputPerMillion: 1n },
      capabilities: CAPABILITIES,
      contextLength: 1000,
      maxOutputTokens: 100,
    })
    const beta = catalog.resolve('beta')
    expect([beta.id, beta.modelId, beta.level, beta.contextLength, beta.maxOutputTokens]).toEqual(['beta', 'beta', 'private', 8192, 512])
  })

  test('routes are built once and frozen: resolving twice gives the same object', () => {
    const route = catalog.resolve('gamma')
    expect(catalog.resolve('gamma')).toBe(route)
    expect(Object.isFrozen(route)).toBe(true)
    expect(catalog.resolve('alpha')).not.toBe(route)
  })

  test.each([
    ['alpha:confidential', 'model alpha is not offered at level confidential'],
    ['alpha:encrypted', 'model alpha is not offered at level encrypted'],
    ['beta:confidential', 'model beta is not offered at level confidential'],
  ])('%p → 400 naming the model and level', (id, message) => {
    const error = errorOf(() => catalog.resolve(id))
    expect([error.status, error.code, error.param, error.message]).toEqual([400, 'invalid_request', 'model', message])
  })

  test.each(['alpha:private', 'beta:private', 'alpha:anonymous', 'alpha:', 'alpha:Confidential', 'alpha:confidential:x', 'alpha:tee'])('%p: an unknown level suffix is 400', id => {
    const error = errorOf(() => catalog.resolve(id))
    expect([error.status, error.code, error.param]).toEqual([400, 'invalid_request', 'model'])
    expect(error.message).toContain('unknown level suffix')
    expect(error.message).toContain(':confidential and :encrypted')
  })

  test.each([
    ['delta', 'delta'],
    ['Alpha', 'Alpha'],
    ['', ''],
    [' alpha', ' alpha'],
    ['delta:confidential', 'delta'],
  ])('unknown model %p → 400 naming %p', (id, named) => {
    const error = errorOf(() => catalog.resolve(id))
    expect([error.status, error.code, error.param]).toEqual([400, 'invalid_request', 'model'])
    expect(error.message).toStartWith(`model "${named}" is not in the catalog`)
  })

  test('a huge id is clipped in the message', () => {
    const error = errorOf(() => catalog.resolve('x'.repeat(100_000)))
    expect(error.message.length).toBeLessThan(400)
  })
})

describe('Catalog.list', () => {
  const catalog = new Catalog({ models: MODELS })

  test('every model in config order, with its levels and one route per level', () => {
    const models = catalog.list()
    expect(models.map(entry => [entry.id, entry.levels])).toEqual([
      ['alpha', ['anonymous']],
      ['beta', ['private']],
      ['gamma', ['anonymous']],
    ])
    for (const entry of models) {
      expect(entry.routes).toEqual([catalog.resolve(entry.id)])
      expect(entry.routes[0]).toBe(catalog.resolve(entry.id))
    }
    expect(models[1]).toMatchObject({ contextLength: 8192, maxOutputTokens: 512, capabilities: CAPABILITIES, price: { inputPerMillion: 1n, outputPerMillion: 2n } })
  })

  test('a level filter keeps the models offered at that level', () => {
    expect(catalog.list({ level: 'anonymous' }).map(entry => entry.id)).toEqual(['alpha', 'gamma'])
    expect(catalog.list({ level: 'private' }).map(entry => entry.id)).toEqual(['beta'])
    expect(catalog.list({ level: 'confidential' })).toEqual([])
    expect(catalog.list({ level: 'encrypted' })).toEqual([])
    expect(catalog.list({})).toEqual(catalog.list())
  })

  test('an empty config is an empty catalog', () => {
    const empty = new Catalog({ models: [] })
    expect(empty.list()).toEqual([])
    expect(errorOf(() => empty.resolve('alpha')).code).toBe('invalid_request')
  })

  test('levels are in spec order', () => {
    expect(PRIVACY_LEVELS).toEqual(['anonymous', 'private', 'confidential', 'encrypted'])
  })
})

test('the embedded default: demo-anonymous and demo-private on the demo provider', () => {
  const catalog = new Catalog(loadConfig({}))
  expect(catalog.resolve('demo-anonymous')).toMatchObject({ level: 'anonymous', backends: [{ provider: 'demo' }] })
  expect(catalog.resolve('demo-private')).toMatchObject({ level: 'private', backends: [{ provider: 'demo' }] })
  expect(errorOf(() => catalog.resolve('demo-private:encrypted')).message).toBe('model demo-private is not offered at level encrypted')
})
