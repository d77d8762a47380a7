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

test('every problem past the shape is reported in one pass: secrets, amounts, rates, bounds', () => {
  // QA: a file with six problems took four boots to see them, each stage stopping at its first.
  const file = [
    'providers: [{ id: up, type: openai-compatible, base_url: "http://127.0.0.1:1/v1", api_key_env: QA_UP_KEY }]',
    'plans: { pro: { monthly_allowance: "99999999999999999999", fusion: true } }',
    'limits: { inference: { key: { burst: 60, per_second: 0.0000015 }, org: { burst: 600, per_second: 10 } } }',
    'ledger: { instance_stale_after_s: 15, bootstrap_credit: "99999999999999999999" }',
    'metrics: { token_env: QA_METRICS_TOKEN }',
    'bootstrap: { owner_email: "nope" }',
  ].join('\n')
  let reported: string[] = []
  try {
    loadConfig({ SVC_CONFIG: '/virtual.yaml' }, () => file)
  } catch (error) {
    reported = (error as ConfigError).problems
  }
  expect(reported).toEqual([
    'providers.0.api_key_env: provider "up": environment variable QA_UP_KEY is not set',
    'plans.pro.monthly_allowance: amount too large',
    'ledger.bootstrap_credit: amount too large',
    'limits.inference.key.per_second: must be a multiple of 0.000001, got 0.0000015',
    'metrics.token_env: QA_METRICS_TOKEN must be set to a token of at least 16 characters',
    'bootstrap.owner_email: must be an email address, got "nope"',
  ])
})
