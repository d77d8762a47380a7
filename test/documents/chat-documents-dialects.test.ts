import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import { anthropicWire } from '../providers/anthropic-wire'
import { openAIWire } from '../providers/openai-wire'
import { startDocumentsGateway, parseCharges as documentCharges, type DocumentsGateway } from '../support/documents'
import type { FakeUpstream } from '../support/fake-upstream'
import { fixture } from './hostile'

// Documents inside Responses (`input_file`) and Messages (`document` blocks), end to end (issue
// 6 point 5): the official SDKs as clients, fake OpenAI-compatible and Anthropic upstreams. The
// upstream must see the extracted text in a delimited text part, never the file; each document
// is one document-parse unit; refusals are 400 in the client's own envelope and charge nothing.

const PRICE_PER_PARSE = 1_000_000n
const turn = { text: 'The report covers Bern and Genève.', finish: 'stop' as const, usage: { inputTokens: 120, outputTokens: 9 } }
let gateway: DocumentsGateway
let openai: FakeUpstream
let anthropic: FakeUpstream
let responses: OpenAI
let messages: Anthropic

beforeEach(async () => {
  gateway = await startDocumentsGateway([
    '{ id: reader-openai, backends: [{ provider: oa, model: m }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 32768, max_output_tokens: 1024 }',
    '{ id: reader-anthropic, backends: [{ provider: an, model: m }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 32768, max_output_tokens: 1024 }',
  ])
  ;({ openai, anthropic } = gateway)
  ;({ openai: responses, anthropic: messages } = gateway.clients)
})

afterEach(() => gateway.close())

const base64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64')
const dataUrl = (bytes: Uint8Array, type: string) => `data:${type};base64,${base64(bytes)}`
const upstreamOf = (backend: 'openai' | 'anthropic') => (backend === 'openai' ? openai : anthropic)
const wireOf = (backend: 'openai' | 'anthropic') => (backend === 'openai' ? openAIWire : anthropicWire)

const parseCharges = () => documentCharges(gateway.t, gateway.orgId)

/** What the upstream received, as JSON text (documents become text parts of the user message). */
const sent = (backend: 'openai' | 'anthropic') => JSON.stringify(upstreamOf(backend).onlyRequest().body)

/** Upstream bodies must carry the extracted text, not the file. */
function expectTextNotFile(backend: 'openai' | 'anthropic', file: Uint8Array) {
  const raw = upstreamOf(backend).onlyRequest().text
  expect(raw).not.toContain(base64(file).slice(0, 40))
  expect(raw).not.toContain('"document"')
  expect(raw).not.toContain('"file"')
  expect(raw).not.toContain('input_file')
}

describe('Responses with input_file parts', () => {
  for (const backend of ['openai', 'anthropic'] as const) {
    test(`${backend} backend: each file becomes a delimited text part; one parse unit per file`, async () => {
      upstreamOf(backend).enqueue({ kind: 'sse', body: wireOf(backend).stream(turn) })
      const docx = await fixture('report.docx')
      const xlsx = await fixture('sheets.xlsx')
      const response = await responses.responses.create({
        model: `reader-${backend}`,
        input: [
          {
            role: 'user',
            content: [
              { type: 'input_text', text: 'Summarise these.' },
              { type: 'input_file', filename: 'report.docx', file_data: dataUrl(docx, 'application/vnd.openxmlformats-officedocument.wordprocessingml.document') },
              // The declared type is wrong on purpose: the content decides.
              { type: 'input_file', filename: 'sheets.pdf', file_data: dataUrl(xlsx, 'application/pdf') },
            ],
          },
        ],
      })
      expect(response.output_text).toBe(turn.text)
      const body = sent(backend)
      expect(body).toContain('Summarise these.')
      expect(body).toContain(JSON.stringify('[Document "report.docx" (docx), attached by the user; its extracted text follows until the end marker]\nQuarterly report — Zürich office').slice(1, -1))
      expect(body).toContain('Bern\\t1200\\t4 %')
      expect(body).toContain('[End of document \\"report.docx\\"]')
      expect(body).toContain('[Sheet: Übersicht]\\nName\\tStadt\\tMenge')
      expectTextNotFile(backend, docx)
      expect(await parseCharges()).toEqual([2n * PRICE_PER_PARSE])
    })
  }

  test('streamed, bare base64 without a type: the content is recognised, the upstream gets the slides', async () => {
    openai.enqueue({ kind: 'sse', body: openAIWire.stream(turn) })
    const pptx = await fixture('slides.pptx')
    const stream = responses.responses.stream({
      model: 'reader-openai',
      input: [{ role: 'user', content: [{ type: 'input_file', filename: 'deck.pptx', file_data: base64(pptx) }] }],
    })
    const final = await stream.finalResponse()
    expect(final.output_text).toBe(turn.text)
    expect(sent('openai')).toContain('[Slide 1]\\nSlide one: Über uns')
    expect(await parseCharges()).toEqual([PRICE_PER_PARSE])
  })

  test('refusals are 400 before the upstream is called, and charge nothing', async () => {
    const refusal = async (part: Record<string, unknown>): Promise<string> => {
      const error = await responses.responses
        .create({ model: 'reader-openai', input: [{ role: 'user', content: [part as unknown as OpenAI.Responses.ResponseInputFile] }] })
        .then(() => undefined, error => error)
      expect(error).toBeInstanceOf(OpenAI.BadRequestError)
      return (error as Error).message
    }
    const big = new Uint8Array(1024 * 1024 + 1).fill(97)
    expect(await refusal({ type: 'input_file', filename: 'big.txt', file_data: dataUrl(big, 'text/plain') })).toMatch(/1 MiB/)
    expect(await refusal({ type: 'input_file', file_id: 'file-abc' })).toMatch(/file_id is not supported/)
    expect(await refusal({ type: 'input_file', file_url: 'https://example.com/a.pdf' })).toMatch(/file_url is not supported/)
    const cut = base64(new TextEncoder().encode('hello world, this is the whole document'))
    expect(await refusal({ type: 'input_file', filename: 'a.txt', file_data: `data:text/plain;base64,${cut.slice(0, 4)}==${cut.slice(4)}` })).toMatch(/base64 data URL/)
    expect(await refusal({ type: 'input_file', filename: 'a.txt', file_data: `${cut.slice(0, 4)}==${cut.slice(4)}` })).toMatch(/base64 data URL/)
    expect(await refusal({ type: 'input_file', filename: 'locked.pdf', file_data: dataUrl(await fixture('encrypted.pdf'), 'application/pdf') })).toMatch(/"locked.pdf": the PDF is encrypted/)
    expect(openai.requests).toHaveLength(0)
    expect(await parseCharges()).toEqual([])
  })
})

describe('Messages with document blocks', () => {
  for (const backend of ['openai', 'anthropic'] as const) {
    test(`${backend} backend: a base64 PDF and a text document become delimited text parts; one parse unit each`, async () => {
      upstreamOf(backend).enqueue({ kind: 'sse', body: wireOf(backend).stream(turn) })
      const pdf = await fixture('report.pdf')
      const message = await messages.messages.create({
        model: `reader-${backend}`,
        max_tokens: 256,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'document', title: 'report.pdf', source: { type: 'base64', media_type: 'application/pdf', data: base64(pdf) } },
              { type: 'document', title: 'notes', context: 'Figures are in millions of EUR', source: { type: 'text', media_type: 'text/plain', data: 'Grüße aus Bern: three notes.' } },
              { type: 'text', text: 'Summarise both.' },
            ],
          },
        ],
      })
      expect(message.content).toEqual([{ type: 'text', text: turn.text }] as never)
      const body = sent(backend)
      expect(body).toContain('[Document \\"report.pdf\\" (pdf), attached by the user; its extracted text follows until the end marker]')
      expect(body).toContain('Quarterly report — Zürich office')
      expect(body).toContain('Genève 980 −2 %')
      expect(body).toContain('[End of document \\"report.pdf\\"]')
      expect(body).toContain('[Document \\"notes\\" (text), attached by the user; its extracted text follows until the end marker]\\n[The user\'s context for this document: Figures are in millions of EUR]\\nGrüße')
      expect(body).toContain('Grüße aus Bern: three notes.')
      expect(body).toContain('Summarise both.')
      expectTextNotFile(backend, pdf)
      expect(await parseCharges()).toEqual([2n * PRICE_PER_PARSE])
    })
  }

  test('a text source is plain text as sent: never sniffed, never held to the binary check; one parse unit each', async () => {
    // Before: its bytes were sniffed like an upload's, so these were 400s (a damaged PDF, RTF, binary data).
    anthropic.enqueue({ kind: 'sse', body: anthropicWire.stream(turn) })
    const texts = ['%PDF-1.7 header notes', '{\\rtf1\\ansi Hello}', 'col\u0000umn\u0001\u0002\u0003\u0004 flags\r\nnext']
    await messages.messages.create({
      model: 'reader-anthropic',
      max_tokens: 256,
      messages: [{ role: 'user', content: texts.map((data, index) => ({ type: 'document' as const, title: `t${index}`, source: { type: 'text' as const, media_type: 'text/plain' as const, data } })) }],
    })
    const body = sent('anthropic')
    expect(body).toContain(JSON.stringify('[Document "t0" (text), attached by the user; its extracted text follows until the end marker]\n%PDF-1.7 header notes\n').slice(1, -1))
    expect(body).toContain(JSON.stringify('(text), attached by the user; its extracted text follows until the end marker]\n{\\rtf1\\ansi Hello}\n').slice(1, -1))
    // Line endings as for an uploaded text file.
    expect(body).toContain(JSON.stringify('col\u0000umn\u0001\u0002\u0003\u0004 flags\nnext\n[End of document "t2"]').slice(1, -1))
    expect(await parseCharges()).toEqual([3n * PRICE_PER_PARSE])
  })

  test('streamed: the upstream still receives the text', async () => {
    anthropic.enqueue({ kind: 'sse', body: anthropicWire.stream(turn) })
    const pdf = await fixture('report.pdf')
    const final = await messages.messages
      .stream({ model: 'reader-anthropic', max_tokens: 256, messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: base64(pdf) } }] }] })
      .finalMessage()
    expect(final.content).toEqual([{ type: 'text', text: turn.text }] as never)
    expect(sent('anthropic')).toContain('Grüße aus Zürich: naïve café, Ελληνικά')
    expect(await parseCharges()).toEqual([PRICE_PER_PARSE])
  })

  test('refusals are 400 invalid_request_error before the upstream is called, and charge nothing', async () => {
    const refusal = async (block: Record<string, unknown>): Promise<string> => {
      const error = await messages.messages
        .create({ model: 'reader-anthropic', max_tokens: 64, messages: [{ role: 'user', content: [block as unknown as Anthropic.DocumentBlockParam] }] })
        .then(() => undefined, error => error)
      expect(error).toBeInstanceOf(Anthropic.BadRequestError)
      const inner = (error as { error: { error: { type: string; message: string } } }).error.error
      expect(inner.type).toBe('invalid_request_error')
      return inner.message
    }
    const big = 'a'.repeat(1024 * 1024 + 1)
    expect(await refusal({ type: 'document', source: { type: 'text', media_type: 'text/plain', data: big } })).toMatch(/1 MiB/)
    expect(await refusal({ type: 'document', source: { type: 'url', url: 'https://example.com/a.pdf' } })).toMatch(/not supported/)
    expect(await refusal({ type: 'document', title: 'locked.pdf', source: { type: 'base64', media_type: 'application/pdf', data: base64(await fixture('encrypted.pdf')) } })).toMatch(/"locked.pdf": the PDF is encrypted/)
    expect(anthropic.requests).toHaveLength(0)
    expect(await parseCharges()).toEqual([])
  })
})
