import { Type } from '@sinclair/typebox'

// Input schemas and descriptions of the tools whose services are built elsewhere (src/fusion/,
// src/web/). Each becomes a tool file like ./chat.ts — `tool({ ...CHAT_FUSION, billed: true,
// run })` — registered in ./index.ts once its service exists. Not offered before (no stubs).

const ModelId = Type.String({ minLength: 1, maxLength: 300, description: 'Model id from svc.list_models' })

/** svc.chat_fusion (spec §4.5): POST /api/v1/chat/fusion as a tool. */
export const CHAT_FUSION = {
  name: 'svc.chat_fusion',
  title: 'Ask two or three models, then synthesize',
  description:
    'Sends one prompt to two or three different models, then a judge model writes a synthesis of their answers. ' +
    'Returns the synthesis plus each participant\'s answer or error. Web search and web fetch are on by default for ' +
    'every participant; turn them off with web_search: false / web_fetch: false. Needs a plan with Fusion access; ' +
    'each participant and the synthesis are billed separately. Reuse request_id to retry without being billed twice.',
  inputSchema: Type.Object(
    {
      models: Type.Array(ModelId, { minItems: 2, maxItems: 3, uniqueItems: true, description: 'Two or three distinct model ids' }),
      request_id: Type.String({
        pattern: '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$',
        description: 'A UUID you choose; the idempotency key of the billing (reuse it only to retry the same request)',
      }),
      prompt: Type.String({ minLength: 1, maxLength: 4 * 1024 * 1024, description: 'The question or task' }),
      system: Type.Optional(Type.String({ maxLength: 1024 * 1024, description: 'Optional system instructions for every participant' })),
      web_search: Type.Optional(Type.Boolean({ default: true, description: 'Let participants search the web (default true)' })),
      web_fetch: Type.Optional(Type.Boolean({ default: true, description: 'Let participants fetch URLs from the prompt (default true)' })),
      max_tokens: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
      temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 2 })),
    },
    { additionalProperties: false },
  ),
}

/** svc.web_search: POST /api/v1/web/search as a tool. */
export const WEB_SEARCH = {
  name: 'svc.web_search',
  title: 'Search the web',
  description: 'Searches the web and returns titles, URLs and snippets. Billed as one web search per call; no model inference.',
  inputSchema: Type.Object(
    {
      query: Type.String({ minLength: 1, maxLength: 400, description: 'The search query' }),
      max_results: Type.Optional(Type.Integer({ minimum: 1, maximum: 20, default: 5 })),
    },
    { additionalProperties: false },
  ),
}

/** svc.web_fetch: POST /api/v1/web/fetch as a tool (spec §4.6 limits). */
export const WEB_FETCH = {
  name: 'svc.web_fetch',
  title: 'Fetch web pages as text',
  description:
    'Fetches one to three public http(s) URLs and returns their readable text. Private, loopback and link-local ' +
    'addresses are refused. Billed per URL retrieved; no model inference.',
  inputSchema: Type.Object(
    {
      urls: Type.Array(Type.String({ minLength: 1, maxLength: 400, description: 'An absolute http or https URL (at most 400 UTF-8 bytes)' }), {
        minItems: 1, maxItems: 3, uniqueItems: true, description: 'One to three distinct URLs',
      }),
    },
    { additionalProperties: false },
  ),
}
