import { describe, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { fileProblems, fromFile, MINIMAL, noFile } from '../support/config'

// The config file's fusion and documents sections: defaults, every key, and bad values named.

describe('fusion', () => {
  const withModel = `${MINIMAL}providers:\n  - { id: d, type: demo }\nmodels:\n  - { id: m, backends: [{ provider: d, model: x }], price: { input_per_mtok: "0", output_per_mtok: "0" }, context_length: 1000, max_output_tokens: 100 }\n`
  const load = (text: string) => loadConfig({ SVC_CONFIG: 'fusion.yaml' }, () => text)

  test('judge and deadlines are read; without the section there is no default judge and 120 s deadlines', () => {
    expect(load(`${withModel}fusion: { judge: m, participant_timeout_ms: 5000, judge_timeout_ms: 9000 }\n`).fusion).toEqual({
      judge: 'm', participantTimeoutMs: 5000, judgeTimeoutMs: 9000,
    })
    expect(load(withModel).fusion).toEqual({ judge: undefined, participantTimeoutMs: 120_000, judgeTimeoutMs: 120_000 })
  })

  test('a judge that is not a configured model, or a deadline out of range, stops the boot by name', () => {
    expect(fileProblems(`${withModel}fusion: { judge: nope }\n`)).toEqual(['fusion.judge: "nope" is not a configured model (known: m)'])
    // A suffix the model does not offer, or an Encrypted judge, would refuse every Fusion request
    // that names no judge, with a 400 blaming the client: the boot names it instead.
    expect(fileProblems(`${withModel}fusion: { judge: "m:confidential" }\n`)).toEqual(['fusion.judge: model m is not offered at level confidential'])
    expect(fileProblems(`${withModel}fusion: { judge: "m:bogus" }\n`)).toEqual([expect.stringMatching(/^fusion\.judge: "m:bogus": unknown level suffix ":bogus"/)])
    const tee = `${MINIMAL}providers:\n  - { id: d, type: demo }\n  - { id: tee, type: attested, base_url: "https://tee.example/v1", proof_format: dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2 }\nmodels:\n  - { id: m, backends: [{ provider: d, model: x }], confidential: [{ provider: tee, model: y }], encrypted: [{ provider: tee, model: y }], price: { input_per_mtok: "0", output_per_mtok: "0" }, context_length: 1000, max_output_tokens: 100 }\n`
    expect(load(`${tee}fusion: { judge: "m:confidential" }\n`).fusion.judge).toBe('m:confidential')
    expect(fileProblems(`${tee}fusion: { judge: "m:encrypted" }\n`)).toEqual(['fusion.judge: "m:encrypted" is Encrypted: the judge must read the answers it synthesises'])
    expect(fileProblems(`${withModel}fusion: { participant_timeout_ms: 10 }\n`)).toEqual([expect.stringContaining('fusion.participant_timeout_ms')])
    expect(fileProblems(`${withModel}fusion: { judges: m }\n`)).toEqual([expect.stringContaining('fusion')])
  })
})

describe('documents', () => {
  test('defaults: one worker per core, guards and the parse price', () => {
    const { documents } = loadConfig({}, noFile)
    expect(documents).toEqual({
      workers: navigator.hardwareConcurrency,
      queueSize: 64,
      timeoutMs: 10_000,
      maxTextBytes: 4 * 1024 * 1024,
      memoryBudgetBytes: 2048 * 1024 * 1024,
      zip: { maxEntries: 5000, maxInflatedBytes: 64 * 1024 * 1024, maxRatio: 200 },
      pdf: { maxPages: 2000, maxObjects: 500_000, maxNesting: 256 },
      pricePerParseNanos: 1_000_000n,
    })
    expect(Object.isFrozen(documents) && Object.isFrozen(documents.zip) && Object.isFrozen(documents.pdf)).toBe(true)
    // A file without the section gets the same defaults.
    expect(fromFile(MINIMAL).config.documents).toEqual(documents)
  })

  test('a file sets every key; workers 0 means CPU cores', () => {
    const { config } = fromFile(`${MINIMAL}documents:
  workers: 3
  queue_size: 0
  timeout_ms: 2500
  max_text_bytes: 65536
  memory_budget_mb: 512
  zip_max_entries: 100
  zip_max_inflated_bytes: 1048576
  zip_max_ratio: 50
  pdf_max_pages: 10
  pdf_max_objects: 1000
  pdf_max_nesting: 32
  price_per_parse: "0.000000001"
`)
    expect(config.documents).toEqual({
      workers: 3, queueSize: 0, timeoutMs: 2500, maxTextBytes: 65536, memoryBudgetBytes: 512 * 1024 * 1024,
      zip: { maxEntries: 100, maxInflatedBytes: 1048576, maxRatio: 50 }, pdf: { maxPages: 10, maxObjects: 1000, maxNesting: 32 }, pricePerParseNanos: 1n,
    })
    expect(fromFile(`${MINIMAL}documents: { workers: 0 }\n`).config.documents.workers).toBe(navigator.hardwareConcurrency)
  })

  test('bad values and unknown keys are named', () => {
    const problems = fileProblems(`${MINIMAL}documents: { timeout_ms: 5, price_per_parse: 0.001, workers: -1, zip_bombs: true }\n`)
    expect(problems.some(problem => problem.startsWith('documents.timeout_ms:'))).toBe(true)
    expect(problems.some(problem => problem.startsWith('documents.workers:'))).toBe(true)
    expect(problems).toContain('documents.price_per_parse: Expected string (write money as a quoted decimal string)')
    expect(problems).toContain('documents.zip_bombs: Unexpected property')
  })
})
