import { describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { createPlanOrg, type TestApp } from '../support/harness'
import { buildWebApp, searxngServer, stopsAfterEach } from '../support/fake-web'

// What the hosted web_search sends its backend (a third party, as Brave is) of the user's text:
// never a credential that the fetch refused to send. The demo model echoes the latest user
// message, so the reply shows the query as the web context block quotes it.

let t: TestApp
const stops = stopsAfterEach(() => t)

async function chat(content: string) {
  const searxng = searxngServer()
  stops.push(searxng.stop)
  ;({ t } = await buildWebApp({ search: searxng.config }))
  const { key } = await createPlanOrg(t, { name: 'query', credit: 1_000_000_000n })
  const client = new OpenAI({ apiKey: key, baseURL: `${t.listen()}/v1`, maxRetries: 0 })
  const completion = await client.chat.completions.create({
    model: 'demo-web',
    messages: [{ role: 'user', content }],
    web_fetch: true,
    web_search: true,
  } as OpenAI.ChatCompletionCreateParamsNonStreaming)
  return { reply: completion.choices[0]!.message.content!, queries: searxng.queries }
}

describe('the hosted search query', () => {
  test('URLs carrying credentials go to the search backend without them; the fetch still lists them as not fetched', async () => {
    // QA: both URLs were "Not fetched" for their credentials, and the search backend received both secrets.
    const { reply, queries } = await chat(
      'Compare https://admin:hunter2@intranet.acme-web.com/ and https://api.acme-web.com/v1?api_key=sk-LIVE-123, ' +
        'also https://app.acme-web.com/cb#access_token=FRAG-9 and https://api.acme-web.com/x?access_token[0]=IDX-7. ' +
        'Keep https://docs.acme-web.com/guide?page=2 and https://blog.acme-web.com/@someone/post as written.',
    )
    const query = 'Compare https://intranet.acme-web.com/ and https://api.acme-web.com/v1, also https://app.acme-web.com/cb and https://api.acme-web.com/x. ' +
      'Keep https://docs.acme-web.com/guide?page=2 and https://blog.acme-web.com/@someone/post as written.'
    expect(queries).toEqual([query])
    expect(reply).toContain(`Query: ${query}\n`)
    expect(reply).toContain('Not fetched: https://admin:hunter2@intranet.acme-web.com/ (URLs with credentials (user:password@) are refused)')
    expect(reply).toContain('Not fetched: https://api.acme-web.com/v1?api_key=sk-LIVE-123 (the query key "api_key" looks like a credential')
  })

  test('credentials in addresses written without http(s):// do not reach the search backend either', async () => {
    // Before, only URLs with a scheme were cut: these reached the backend as written.
    const { queries } = await chat('Why does admin:hunter2@intranet.acme-web.com/status fail, and api.acme-web.com/v1?api_key=sk-LIVE-123 too? Mail me@acme-web.com at 10:30.')
    expect(queries).toEqual(['Why does intranet.acme-web.com/status fail, and api.acme-web.com/v1 too? Mail me@acme-web.com at 10:30.'])
  })

  test('a URL of another scheme keeps its password from the backend when text precedes it in the word', async () => {
    // QA: `NAME=postgres://…` and `jdbc:postgresql://…` reached the backend with the password.
    const { queries } = await chat('Why does DATABASE_URL=postgres://app:hunter2@db.acme-web.com/app fail, and jdbc:postgresql://app:hunter2@db.acme-web.com/app?')
    expect(queries).toEqual(['Why does DATABASE_URL=postgres://db.acme-web.com/app fail, and jdbc:postgresql://db.acme-web.com/app?'])
  })

  test('a URL with credentials that does not parse is left out of the query whole', async () => {
    const { queries } = await chat('what is at https://admin:hunter2@[bad/ today')
    expect(queries).toEqual(['what is at today'])
  })
})
