import { describe, expect, test } from 'bun:test'
import { Value } from '@sinclair/typebox/value'
import type { ModelRoute } from '../../src/catalog/types'
import { ApiError } from '../../src/http/errors'
import { chatTool } from '../../src/mcp/tools/chat'
import { CHAT_FUSION_INPUT } from '../../src/mcp/tools/chat-fusion'
import { WEB_FETCH_INPUT } from '../../src/mcp/tools/web-fetch'
import { WEB_SEARCH_INPUT } from '../../src/mcp/tools/web-search'
import type { PipelineDeps } from '../../src/inference/pipeline'

// Tool-level rules that need no server: encrypted models never run through MCP, and the schemas
// of the Fusion and web tools say what spec §4.5 and §8 say.

describe('svc.chat', () => {
  test('an encrypted model is refused before anything is reserved or called', async () => {
    const route = { id: 'm:encrypted', modelId: 'm', level: 'encrypted' } as unknown as ModelRoute
    let touched = false
    const pipeline = new Proxy({}, { get: () => { touched = true; return () => { throw new Error('must not be called') } } }) as unknown as PipelineDeps
    const tool = chatTool({ resolve: () => route }, pipeline)
    const request = new Request('http://localhost/mcp')
    const failure = await tool.run({ model: 'm:encrypted', prompt: 'hi' }, { principal: {} as never, requestId: 'r', httpRequest: request, signal: request.signal }).catch(error => error)
    expect(failure).toBeInstanceOf(ApiError)
    expect(failure.code).toBe('invalid_request')
    expect(failure.message).toContain('encrypted models are not available through MCP')
    expect(touched).toBe(false)
  })
})

describe('input schemas of the Fusion and web tools', () => {
  const uuid = '0190f3c4-6a7e-7b1c-9d2e-3f4a5b6c7d8e'
  test('svc.chat_fusion: 2 or 3 distinct models, a UUID request id, a prompt; web options optional', () => {
    const schema = CHAT_FUSION_INPUT
    expect(Value.Check(schema, { models: ['a', 'b'], request_id: uuid, prompt: 'p' })).toBe(true)
    expect(Value.Check(schema, { models: ['a', 'b', 'c'], request_id: uuid, prompt: 'p', web_search: false, web_fetch: false })).toBe(true)
    expect(Value.Check(schema, { models: ['a'], request_id: uuid, prompt: 'p' })).toBe(false)
    expect(Value.Check(schema, { models: ['a', 'b', 'c', 'd'], request_id: uuid, prompt: 'p' })).toBe(false)
    expect(Value.Check(schema, { models: ['a', 'a'], request_id: uuid, prompt: 'p' })).toBe(false)
    expect(Value.Check(schema, { models: ['a', 'b'], request_id: 'not-a-uuid', prompt: 'p' })).toBe(false)
    expect(Value.Check(schema, { models: ['a', 'b'], request_id: uuid })).toBe(false)
  })

  test('svc.web_fetch: one to three distinct URLs of at most 400 characters; svc.web_search: a query', () => {
    expect(Value.Check(WEB_FETCH_INPUT, { urls: ['https://a.example'] })).toBe(true)
    expect(Value.Check(WEB_FETCH_INPUT, { urls: [] })).toBe(false)
    expect(Value.Check(WEB_FETCH_INPUT, { urls: ['https://a', 'https://b', 'https://c', 'https://d'] })).toBe(false)
    expect(Value.Check(WEB_FETCH_INPUT, { urls: [`https://a.example/${'x'.repeat(400)}`] })).toBe(false)
    expect(Value.Check(WEB_SEARCH_INPUT, { query: 'bun elysia' })).toBe(true)
    expect(Value.Check(WEB_SEARCH_INPUT, {})).toBe(false)
  })
})
