import { expect, test } from 'bun:test'
import { ConfigError, loadConfig } from '../../src/config/load'

// How a bad config file is reported: one line per bad field, naming what is wrong with it.
const BASE = 'plans: { payg: { monthly_allowance: "0", fusion: false } }\n'
const problems = (yaml: string): string[] => {
  try {
    loadConfig({ SVC_CONFIG: '/virtual.yaml' }, () => BASE + yaml)
  } catch (error) {
    return (error as ConfigError).problems
  }
  return []
}

test('a missing field is one problem, not also "Expected object" or "Expected integer" for the same field', () => {
  // Before: "models.0.price: Expected required property" and "models.0.price: Expected object".
  expect(problems('providers: [{ id: d, type: demo }]\nmodels: [{ id: m, backends: [{ provider: d, model: x }], context_length: 10, max_output_tokens: 5 }]')).toEqual([
    'models.0.price: Expected required property',
  ])
  expect(problems('limits: { inference: { key: { burst: 1 } } }')).toEqual([
    'limits.inference.org: Expected required property',
    'limits.inference.key.per_second: Expected required property',
  ])
})

test('web.search names the field its backend lacks, or the backends there are, never "Expected union value"', () => {
  expect(problems('web: { search: { backend: searxng } }')).toEqual(['web.search.base_url: Expected required property'])
  expect(problems('web: { search: { backend: brave } }')).toEqual(['web.search.api_key_env: Expected required property'])
  expect(problems('web: { search: { backend: bing } }')).toEqual(['web.search.backend: must be one of searxng, brave, none'])
  expect(problems('web: { search: { base_url: "http://searxng:8080" } }')).toEqual(['web.search.backend: must be one of searxng, brave, none'])
  expect(problems('web: { search: { backend: none, base_url: "http://searxng:8080" } }')).toEqual(['web.search.base_url: Unexpected property'])
  expect(problems('web: { search: 5 }')).toEqual(['web.search: Expected object'])
  // Unions of plain values read as before.
  expect(problems('providers: [{ id: a, type: ollama }]')).toEqual(['providers.0.type: must be one of openai-compatible, anthropic, demo, attested'])
})
