import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { openAIWire } from '../providers/openai-wire'
import { startDocumentsGateway, parseCharges as documentCharges, type DocumentsGateway } from '../support/documents'
import type { FakeUpstream } from '../support/fake-upstream'
import type { TestApp } from '../support/harness'
import { fixture, lyingZipBomb } from './hostile'

// Chat Completions with `file` content parts (spec §4.8, §4.12), the official `openai` SDK as
// the client and a fake OpenAI-compatible upstream: the upstream must see the extracted text
// in a delimited text part, never the file; bad attachments are 400 and charge nothing.

const PRICE_PER_PARSE = 1_000_000n
let gateway: DocumentsGateway
let upstream: FakeUpstream
let t: TestApp
let client: OpenAI

beforeEach(async () => {
  gateway = await startDocumentsGateway([
    '{ id: reader, backends: [{ provider: oa, model: m }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 32768, max_output_tokens: 1024 }',
    '{ id: tiny, backends: [{ provider: oa, model: m }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 64, max_output_tokens: 8 }',
    '{ id: claude, backends: [{ provider: an, model: c }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 32768, max_output_tokens: 1024 }',
  ])
  ;({ t, openai: upstream } = gateway)
  client = gateway.clients.openai
})

afterEach(() => gateway.close())

const dataUrl = (bytes: Uint8Array, type: string) => `data:${type};base64,${Buffer.from(bytes).toString('base64')}`
const turn = { text: 'The report covers Bern and Genève.', finish: 'stop' as const, usage: { inputTokens: 120, outputTokens: 9 } }

const parseCharges = () => documentCharges(t, gateway.orgId)

describe('Chat Completions with file parts', () => {
  test('each file becomes a delimited text part the upstream sees; files are billed one parse unit each', async () => {
    upstream.enqueue({ kind: 'sse', body: openAIWire.stream(turn) })
    const docx = await fixture('report.docx')
    const xlsx = await fixture('sheets.xlsx')
    const completion = await client.chat.completions.create({
      model: 'reader',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Summarise these.' },
            { type: 'file', file: { file_data: dataUrl(docx, 'application/vnd.openxmlformats-officedocument.wordprocessingml.document'), filename: 'report.docx' } },
            // The declared type is wrong on purpose: the content decides.
            { type: 'file', file: { file_data: dataUrl(xlsx, 'application/pdf'), filename: 'sheets.pdf' } },
          ],
        },
      ],
    })
    expect(completion.choices[0]!.message.content).toBe(turn.text)

    const sent = upstream.onlyRequest().body
    const parts = sent.messages[0].content
    const texts: string[] = typeof parts === 'string' ? [parts] : parts.map((part: { type: string; text?: string }) => part.text ?? `<${part.type}>`)
    const all = texts.join('\n')
    expect(all).toContain('Summarise these.')
    expect(all).toContain('[Document "report.docx" (docx), attached by the user; its extracted text follows until the end marker]\nQuarterly report — Zürich office')
    expect(all).toContain('Bern\t1200\t4 %')
    expect(all).toContain('[End of document "report.docx"]')
    expect(all).toContain('[Document "sheets.pdf" (xlsx)')
    expect(all).toContain('[Sheet: Übersicht]\nName\tStadt\tMenge')
    // No file bytes or file parts went upstream.
    expect(upstream.onlyRequest().text).not.toContain(Buffer.from(docx).toString('base64').slice(0, 40))
    expect(JSON.stringify(sent)).not.toContain('"file"')
    // One settlement for the request's two parse units.
    expect(await parseCharges()).toEqual([2n * PRICE_PER_PARSE])
  })

  test('streamed as well: the upstream still receives the text', async () => {
    upstream.enqueue({ kind: 'sse', body: openAIWire.stream(turn) })
    const stream = await client.chat.completions.create({
      model: 'reader',
      stream: true,
      messages: [{ role: 'user', content: [{ type: 'file', file: { file_data: dataUrl(await fixture('slides.pptx'), 'application/octet-stream'), filename: 'deck.pptx' } }] }],
    })
    let text = ''
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ''
    expect(text).toBe(turn.text)
    expect(JSON.stringify(upstream.onlyRequest().body)).toContain('[Slide 1]\\nSlide one: Über uns')
  })

  test('a data URL with media type parameters (RFC 2397: ;charset=…, ;name=…) is read, as on Responses', async () => {
    // Before: Chat Completions refused "data:text/plain;charset=utf-8;base64,…" that Responses accepted.
    upstream.enqueue({ kind: 'sse', body: openAIWire.stream(turn) })
    const notes = Buffer.from('Genève office notes').toString('base64')
    await client.chat.completions.create({
      model: 'reader',
      messages: [{ role: 'user', content: [{ type: 'file', file: { file_data: `data:text/plain;charset=utf-8;base64,${notes}`, filename: 'notes.txt' } }] }],
    })
    expect(JSON.stringify(upstream.onlyRequest().body)).toContain('Genève office notes')
    expect(await parseCharges()).toEqual([PRICE_PER_PARSE])
  })

  test("a long file name is cut at 200 UTF-16 units, never inside a character's surrogate pair", async () => {
    upstream.enqueue({ kind: 'sse', body: openAIWire.stream(turn) })
    const notes = Buffer.from('short notes').toString('base64')
    await client.chat.completions.create({
      model: 'reader',
      messages: [{ role: 'user', content: [{ type: 'file', file: { file_data: `data:text/plain;base64,${notes}`, filename: `a${'📄'.repeat(150)}.txt` } }] }],
    })
    // 'a' and 99 pages fill 199 units: the 100th page's pair would be cut in two, so it is left out.
    const sent = (upstream.onlyRequest().body as { messages: Array<{ content: string }> }).messages[0]!.content
    expect(sent).toContain(`[Document "a${'📄'.repeat(99)}" (text)`)
  })

  test('refusals are 400 before the upstream is called, and charge nothing', async () => {
    const refusal = async (content: OpenAI.ChatCompletionContentPart[], model = 'reader'): Promise<string> => {
      const error = await client.chat.completions.create({ model, messages: [{ role: 'user', content }] }).then(() => undefined, error => error)
      expect(error).toBeInstanceOf(OpenAI.BadRequestError)
      return (error as Error).message
    }
    const big = new Uint8Array(1024 * 1024 + 1).fill(97)
    expect(await refusal([{ type: 'file', file: { file_data: dataUrl(big, 'text/plain'), filename: 'big.txt' } }])).toMatch(/1 MiB/)
    expect(await refusal([{ type: 'file', file: { file_id: 'file-abc' } }])).toMatch(/file_id is not supported/)
    expect(await refusal([{ type: 'file', file: { filename: 'x.pdf' } }])).toMatch(/file_data is required/)
    // Not base64 (a `=` inside): Buffer would decode only what comes before it, a cut document.
    const cut = Buffer.from('hello world, this is the whole document').toString('base64')
    const malformed = `${cut.slice(0, 4)}==${cut.slice(4)}`
    expect(await refusal([{ type: 'file', file: { file_data: malformed, filename: 'a.txt' } }])).toMatch(/not base64/)
    expect(await refusal([{ type: 'file', file: { file_data: `data:text/plain;base64,${malformed}`, filename: 'a.txt' } }])).toMatch(/not base64/)
    expect(await refusal([{ type: 'image_url', image_url: { url: `data:image/png;base64,${malformed}` } }])).toMatch(/not base64/)
    expect(await refusal([{ type: 'file', file: { file_data: dataUrl(await fixture('encrypted.pdf'), 'application/pdf'), filename: 'locked.pdf' } }])).toMatch(/attached file "locked.pdf": the PDF is encrypted/)
    expect(await refusal([{ type: 'file', file: { file_data: dataUrl(lyingZipBomb(2 * 1024 * 1024), 'application/zip'), filename: 'bomb.docx' } }])).toMatch(/bomb.docx/)
    // A document too long for the model's context is refused after extraction, unbilled.
    expect(await refusal([{ type: 'file', file: { file_data: dataUrl(await fixture('report.docx'), 'application/octet-stream'), filename: 'r.docx' } }], 'tiny')).toMatch(/does not fit/)
    expect(upstream.requests).toHaveLength(0)
    expect(await parseCharges()).toEqual([])
  })

  test("a request its backend's adapter refuses after the files were read charges nothing for them", async () => {
    // Before: the parse units were settled once the chat was admitted, before the backend's adapter
    // refused the request (temperature above 1 on an Anthropic backend): a 400, and a parse charged.
    const file = { type: 'file' as const, file: { file_data: dataUrl(new TextEncoder().encode('hello document'), 'text/plain'), filename: 'a.txt' } }
    const error = await client.chat.completions.create({ model: 'claude', temperature: 1.5, messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }, file] }] }).then(() => undefined, error => error)
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    expect((error as Error).message).toMatch(/temperature 1.5 is above 1/)
    expect(gateway.anthropic.requests).toHaveLength(0)
    expect(await parseCharges()).toEqual([])
    expect(t.deps.ledger.pools.all().reduce((sum, pool) => sum + pool.held, 0n)).toBe(0n)
  })

  test('a chat whose stream opens and fails before any output charges nothing for its files', async () => {
    // Before (regression QA): the units were settled once the stream opened (its first event, a
    // role chunk), so a 502 with no output still charged the parse.
    const file = { type: 'file' as const, file: { file_data: dataUrl(new TextEncoder().encode('hello document'), 'text/plain'), filename: 'a.txt' } }
    const failing = () => ({ kind: 'sse' as const, body: 'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\ndata: {"error":{"message":"overloaded","type":"server_error"}}\n\n' })
    upstream.enqueue(failing(), failing())
    for (const stream of [false, true]) {
      const outcome = await client.chat.completions.create({ model: 'reader', stream, messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }, file] }] })
        .then(async reply => (stream ? Array.fromAsync(reply as AsyncIterable<unknown>) : reply))
        .then(() => 'answered', error => String(error))
      expect(outcome).not.toBe('answered')
    }
    expect(upstream.requests).toHaveLength(2)
    expect(await parseCharges()).toEqual([])
    expect(t.deps.ledger.pools.all().reduce((sum, pool) => sum + pool.held, 0n)).toBe(0n)
  })
})
