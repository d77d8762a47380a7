import { describe, expect, test } from 'bun:test'
import SwaggerParser from '@apidevtools/swagger-parser'
import { buildTestApp, json } from '../support/harness'
import { approve, pkce, postForm, registerClient } from '../support/oauth'

describe('OpenAPI description and docs', () => {
  test('/openapi.json is OpenAPI 3.1 and every operation has a summary, tags and typed schemas', async () => {
    const t = await buildTestApp()
    const response = await t.request('GET', '/openapi.json')
    expect(response.status).toBe(200)
    const spec = await json(response)
    expect(spec.openapi).toMatch(/^3\.1\./)
    expect(spec.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' })
    const operations = Object.entries(spec.paths).flatMap(([path, item]) =>
      Object.entries(item as Record<string, any>).map(([method, operation]) => ({ name: `${method.toUpperCase()} ${path}`, operation })),
    )
    expect(operations.map(op => op.name)).toEqual(
      expect.arrayContaining(['POST /api/v1/api-keys', 'GET /api/v1/api-keys', 'POST /api/v1/chat/fusion', 'DELETE /api/v1/api-keys/{key_id}', 'GET /healthz', 'GET /readyz', 'POST /api/v1/web/fetch', 'POST /api/v1/web/search']),
    )
    for (const { name, operation } of operations) {
      expect(operation.summary ? name : `${name} lacks a summary`).toBe(name)
      expect(operation.tags?.length ? name : `${name} lacks tags`).toBe(name)
      for (const [status, reply] of Object.entries(operation.responses ?? {}) as Array<[string, any]>) {
        // No body: 204, redirects (OAuth), 202 (an accepted MCP notification).
        if (['204', '202', '303'].includes(status)) continue
        // RFC 7009 §2.2: a revocation answers 200 with an empty body; Streamable HTTP's 405 for
        // GET/DELETE /mcp (no server stream, no sessions) is bare too.
        if (['POST /oauth/revoke 200', 'GET /mcp 405', 'DELETE /mcp 405'].includes(`${name} ${status}`)) {
          expect(reply.content).toBeUndefined()
          continue
        }
        // The OAuth consent pages answer in HTML, /metrics in Prometheus text.
        const schema = reply.content?.['application/json']?.schema ?? reply.content?.['text/html']?.schema ?? reply.content?.['text/plain']?.schema
        expect(schema ? name : `${name} ${status} has no schema`).toBe(name)
      }
      if (name.startsWith('POST')) {
        // OAuth endpoints take form-encoded bodies (RFC 6749 §3.2), everything else JSON.
        const body = operation.requestBody.content['application/json'] ?? operation.requestBody.content['application/x-www-form-urlencoded'] ?? operation.requestBody.content['multipart/form-data']
        expect(body?.schema?.type || body?.schema?.oneOf ? name : `${name} has no request body schema`).toBe(name)
        // A JSON object; /mcp's is a JSON-RPC message or a batch of them.
        expect(body.schema.type ?? body.schema.oneOf.map((each: { type: string }) => each.type).join(' or ')).toBe(name === 'POST /mcp' ? 'object or array' : 'object')
        // Every POST refuses a missing body (400), so none is optional.
        expect(operation.requestBody.required ? name : `${name} marks its body optional`).toBe(name)
      }
      if (name.startsWith('POST') && operation.requestBody.content['multipart/form-data']) {
        // The document upload: its `file` part typed as binary.
        expect(operation.requestBody.content['multipart/form-data'].schema.properties.file.format).toBe('binary')
      }
    }
    await t.close()
  })

  test('every route the app serves is in the document, and only those: the docs themselves excepted', async () => {
    const t = await buildTestApp()
    const spec = await json(await t.request('GET', '/openapi.json'))
    const documented = Object.entries(spec.paths).flatMap(([path, item]) => Object.keys(item as object).map(method => `${method.toUpperCase()} ${path}`))
    // Elysia writes path parameters as :name, OpenAPI as {name}; the raw-slash model route's
    // wildcard is documented as {rest} (src/http/openapi-complete.ts).
    const served = t.app.routes.map(route => `${route.method} ${route.path.replace(/:([A-Za-z_]+)/g, '{$1}').replace(/\/\*$/, '/{rest}')}`)
    // The Swagger UI page, its OAuth2 redirect page, the document and the UI's script and stylesheet describe the API; they are not part of it.
    const docs = ['GET /docs', 'GET /docs/oauth2-redirect.html', 'GET /openapi.json', 'GET /docs-assets/swagger-ui-bundle.js', 'GET /docs-assets/swagger-ui.css']
    expect(served).toEqual(expect.arrayContaining(docs))
    // CORS preflights (OPTIONS, src/http/cors.ts) are the browser's protocol, not the API's.
    expect(documented.toSorted()).toEqual(served.filter(name => !docs.includes(name) && !name.startsWith('OPTIONS ')).toSorted())
    // Paths with a dot were once dropped as "static files" by the plugin's default.
    expect(documented).toEqual(
      expect.arrayContaining([
        'GET /.well-known/oauth-authorization-server', 'GET /.well-known/oauth-authorization-server/mcp',
        'GET /.well-known/oauth-protected-resource', 'GET /.well-known/oauth-protected-resource/mcp',
      ]),
    )
    await t.close()
  })

  test('every path parameter is in its path template, and every template variable is a parameter (OpenAPI 3.1 §4.8.12)', async () => {
    const t = await buildTestApp()
    const spec = await json(await t.request('GET', '/openapi.json'))
    const mismatched: string[] = []
    for (const [path, item] of Object.entries(spec.paths) as Array<[string, Record<string, any>]>) {
      const inTemplate = [...path.matchAll(/\{([^}]+)\}/g)].map(match => match[1]!)
      for (const [method, operation] of Object.entries(item)) {
        const declared = (operation.parameters ?? []).filter((parameter: any) => parameter.in === 'path').map((parameter: any) => parameter.name as string)
        if (declared.toSorted().join() !== inTemplate.toSorted().join()) mismatched.push(`${method.toUpperCase()} ${path}: ${declared.join(', ')}`)
      }
    }
    expect(mismatched).toEqual([])
    // The raw-slash retrieval is documented so "Try it out" can send the id's tail, and it answers.
    expect(spec.paths['/v1/models/{model}/{rest}'].get.responses['200']).toBeDefined()
    await t.close()
  })

  test("every authenticated operation documents the auth step's answers (spec §5, §7, §8)", async () => {
    const t = await buildTestApp()
    const spec = await json(await t.request('GET', '/openapi.json'))
    const missing: string[] = []
    for (const [path, item] of Object.entries(spec.paths) as Array<[string, Record<string, any>]>) {
      for (const [method, operation] of Object.entries(item)) {
        const name = `${method.toUpperCase()} ${path}`
        const schemes = (operation.security ?? []).flatMap((entry: object) => Object.keys(entry))
        const responses = operation.responses ?? {}
        // /mcp takes only MCP tokens: 401 bad token, 403 foreign Origin, 503 credentials unreadable
        // (the database is down), 413 past its body cap; refusals past auth are JSON-RPC errors.
        if (schemes.includes('oauth2') && !schemes.includes('bearerAuth')) {
          for (const status of ['401', '403', '503', ...(operation.requestBody ? ['413'] : [])]) if (!responses[status]) missing.push(`${name} ${status}`)
          continue
        }
        if (!schemes.includes('bearerAuth')) continue
        // 401 bad credential, 403 X-Org-ID mismatch or no admin authority, 503 credentials unreadable.
        for (const status of ['401', '403', '503']) if (!responses[status]) missing.push(`${name} ${status}`)
        // The snapshot route takes from no bucket (SECURITY-NOTES L10): it never answers 429.
        if (name === 'GET /api/v1/rate-limits') {
          if (responses['429']) missing.push(`${name} documents a 429 it never sends`)
        } else {
          const headers = Object.keys(responses['429']?.headers ?? {})
          for (const header of ['Retry-After', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']) {
            if (!headers.includes(header)) missing.push(`${name} 429 ${header}`)
          }
        }
        // Every body is read under a size cap (src/http/body-limit.ts): 413 past it.
        if (operation.requestBody && !responses['413']) missing.push(`${name} 413`)
        // CLI tokens (svc_cli_, cli:inference) are accepted everywhere but on the key-only snapshot route.
        const cli = (operation.security as Array<Record<string, string[]>>).some(entry => entry.oauth2?.includes('cli:inference'))
        if (cli === (name === 'GET /api/v1/rate-limits')) missing.push(`${name} oauth2 cli:inference ${cli ? 'listed' : 'missing'}`)
      }
    }
    // Spec §4.4, §4.8, §4.9 name Cache-Control: no-store on these replies.
    for (const name of ['GET /api/v1/billing/balance', 'GET /api/v1/attestation', 'POST /api/v1/attachments/parse']) {
      const [method, path] = name.split(' ') as [string, string]
      const header = spec.paths[path][method.toLowerCase()].responses['200'].headers?.['Cache-Control']
      if (header?.schema?.const !== 'no-store') missing.push(`${name} 200 Cache-Control: no-store`)
    }
    expect(missing).toEqual([])
    await t.close()
  })

  test('streamed replies are documented as text/event-stream, and X-Org-ID on every authenticated operation (spec §6)', async () => {
    const t = await buildTestApp()
    const first = await json(await t.request('GET', '/openapi.json'))
    // Completed once: the plugin caches its document, and a second fetch must not add twice.
    const spec = await json(await t.request('GET', '/openapi.json'))
    expect(spec).toEqual(first)
    const streaming: string[] = []
    const orgHeader: string[] = []
    for (const [path, item] of Object.entries(spec.paths) as Array<[string, Record<string, any>]>) {
      for (const [method, operation] of Object.entries(item)) {
        const name = `${method.toUpperCase()} ${path}`
        expect(Object.keys(operation).filter(key => key.startsWith('x-'))).toEqual([])
        const stream = operation.responses?.['200']?.content?.['text/event-stream']
        if (stream) {
          streaming.push(name)
          expect(stream.schema.description.length).toBeGreaterThan(20)
        }
        // Only a 200 streams: a route sharing one response object between statuses keeps its errors JSON.
        for (const [status, reply] of Object.entries(operation.responses ?? {}) as Array<[string, any]>) {
          if (status !== '200') expect(reply.content?.['text/event-stream'] ? `${name} ${status}` : '').toBe('')
        }
        const headers = (operation.parameters ?? []).filter((parameter: any) => parameter.in === 'header' && parameter.name === 'X-Org-ID')
        if (headers.length > 0) orgHeader.push(name)
        expect(headers.length).toBeLessThanOrEqual(1)
        // Every operation an organization's credential authenticates (not /metrics, whose token is the operator's).
        const orgCredential = (operation.security ?? []).some((scheme: object) => !Object.hasOwn(scheme, 'metricsToken'))
        expect(headers.length).toBe(orgCredential ? 1 : 0)
      }
    }
    expect(streaming.toSorted()).toEqual(['POST /api/v1/chat/fusion', 'POST /mcp', 'POST /v1/chat/completions', 'POST /v1/messages', 'POST /v1/responses'])
    expect(orgHeader).toEqual(expect.arrayContaining(['POST /v1/chat/completions', 'GET /api/v1/billing/balance', 'POST /mcp']))
    expect(orgHeader).not.toContain('GET /v1/models')
    // The header does what the document says: another organization's id is refused.
    const org = await t.createOrg()
    const response = await t.request('GET', '/api/v1/billing/balance', { key: org.adminKey, headers: { 'x-org-id': '00000000-0000-7000-8000-000000000000' } })
    expect(response.status).toBe(403)
    await t.close()
  })

  test('the document passes an OpenAPI 3.1 validator', async () => {
    const t = await buildTestApp()
    const spec = await json(await t.request('GET', '/openapi.json'))
    // The validator dereferences in place: give it a copy.
    await SwaggerParser.validate(structuredClone(spec))
    // A body-less reply (the key revocation's 204) has no content: Elysia wrote its void schema there.
    const revoked = spec.paths['/api/v1/api-keys/{key_id}'].delete.responses['204']
    expect(revoked.description).toBe('Revoked')
    expect(revoked.content).toBeUndefined()
    // QA: asked first as /openapi.json/, the document was served unfinished (and invalid).
    const fresh = await buildTestApp()
    expect(await json(await fresh.request('GET', '/openapi.json/'))).toEqual(spec)
    await fresh.close()
    // QA: the document said less than the server enforces.
    expect(spec.paths['/metrics'].get.security).toEqual([{ metricsToken: [] }])
    expect(spec.components.securitySchemes.metricsToken).toMatchObject({ type: 'http', scheme: 'bearer' })
    const fusionKey = (spec.paths['/api/v1/chat/fusion'].post.parameters as Array<{ name: string; schema: object }>).find(parameter => parameter.name === 'Idempotency-Key')
    expect(fusionKey?.schema).toEqual({ type: 'string', format: 'uuid' })
    expect(spec.paths['/mcp'].post.requestBody.content['application/json'].schema.oneOf.map((each: { type: string }) => each.type)).toEqual(['object', 'array'])
    await t.close()
  })

  test('parameters a handler reads itself are documented: the Encrypted headers, the models routes\' Anthropic paging, the attestation query', async () => {
    const t = await buildTestApp()
    const spec = await json(await t.request('GET', '/openapi.json'))
    const names = (path: string, method: string) => (spec.paths[path][method].parameters as Array<{ in: string; name: string }>).map(parameter => `${parameter.in} ${parameter.name}`)
    const chat = names('/v1/chat/completions', 'post')
    for (const header of ['svc-encrypted', 'svc-encrypted-client-pub-key', 'svc-encrypted-model-pub-key', 'svc-encrypted-signing-algo', 'svc-encrypted-encryption-version', 'svc-encrypted-nonce', 'svc-encrypted-timestamp', 'svc-encrypted-encrypt-all-fields', 'svc-encrypted-response-evidence']) {
      expect(chat).toContain(`header ${header}`)
    }
    expect(names('/v1/models', 'get')).toEqual(['query privacy_tier', 'header anthropic-version', 'query limit', 'query after_id', 'query before_id', 'query lifecycle[]', 'query beta'])
    expect(names('/v1/models/{model}', 'get')).toEqual(['path model', 'header anthropic-version', 'query beta'])
    // What the document says is what the route takes: an Anthropic client pages with them, and its errors are in its envelope.
    const page = await t.app.handle(new Request('http://localhost/v1/models?limit=1&lifecycle[]=active&beta=true', { headers: { 'anthropic-version': '2023-06-01' } }))
    expect(page.status).toBe(200)
    expect(((await page.json()) as { data: unknown[] }).data).toHaveLength(1)
    const refused = await t.app.handle(new Request('http://localhost/v1/models?limit=0', { headers: { 'anthropic-version': '2023-06-01' } }))
    expect(refused.status).toBe(400)
    expect(spec.paths['/v1/models'].get.responses['400'].content['application/json'].schema.anyOf).toHaveLength(2)
    const attestation = spec.paths['/api/v1/attestation'].get.parameters as Array<{ name: string; schema: { enum?: string[]; pattern?: string } }>
    expect(attestation.find(parameter => parameter.name === 'trust_tier')!.schema.enum).toEqual(['confidential', 'encrypted'])
    expect(attestation.find(parameter => parameter.name === 'signing_algo')!.schema.enum).toEqual(['ed25519', 'ecdsa'])
    expect(new RegExp(attestation.find(parameter => parameter.name === 'nonce')!.schema.pattern!).test('ab'.repeat(32))).toBe(true)
    await t.close()
  })

  test('every error status a route answers to bad input is among its documented responses', async () => {
    const t = await buildTestApp()
    const org = await t.createOrg()
    const spec = await json(await t.request('GET', '/openapi.json'))
    // Issued per operation: the fake clock moves an hour per operation, past a token's lifetime.
    const mcpToken = async () => (await t.deps.oauth.tokens.issue({ clientId: 'svc-cli', userId: org.ownerUserId, orgId: org.orgId, scope: 'mcp:inference', resource: null, keyId: org.adminKeyId })).tokens.access_token
    // Each operation gets no credential, a malformed one and the one it takes, each with every
    // body below: what a client gets wrong first. A declared length past every cap is a 413.
    const bodies: Array<[string, string | undefined, Record<string, string>]> = [
      ['no body', undefined, {}],
      ['{}', '{}', { 'content-type': 'application/json' }],
      ['malformed JSON', '{', { 'content-type': 'application/json' }],
      ['text', 'x', { 'content-type': 'text/plain' }],
      ['form', 'a=b', { 'content-type': 'application/x-www-form-urlencoded' }],
      ['empty multipart', '--b--\r\n', { 'content-type': 'multipart/form-data; boundary=b' }],
      ['oversized', '{}', { 'content-type': 'application/json', 'content-length': String(512 * 1024 * 1024) }],
    ]
    const undocumented = new Set<string>()
    for (const [path, item] of Object.entries(spec.paths) as Array<[string, Record<string, any>]>) {
      const url = path.replace('{key_id}', '00000000-0000-7000-8000-000000000000').replace('{model}', 'no-such-model').replace('{rest}', 'x')
      for (const [method, operation] of Object.entries(item)) {
        const schemes = (operation.security ?? []).flatMap((entry: Record<string, string[]>) => Object.entries(entry).flatMap(([scheme, scopes]) => [scheme, ...scopes]))
        const credential = schemes.includes('mcp:inference') ? await mcpToken() : org.adminKey
        for (const authorization of [undefined, 'Bearer z_sk_malformed', `Bearer ${credential}`]) {
          for (const [name, body, headers] of bodies) {
            if (method === 'get' && body !== undefined) continue
            const request = new Request(`http://localhost${url}`, { method: method.toUpperCase(), headers: { ...headers, ...(authorization ? { authorization } : {}) }, body })
            const response = await t.app.handle(request)
            if (response.status >= 400 && !operation.responses?.[String(response.status)]) undocumented.add(`${method.toUpperCase()} ${path} ${response.status} (${name})`)
          }
        }
        // The buckets would otherwise turn the rest into 429s.
        t.clock.advance(3_600_000)
      }
    }
    expect([...undocumented]).toEqual([])
    await t.close()
  }, 30_000)

  test('/docs serves Swagger UI from the gateway itself, never a CDN', async () => {
    const t = await buildTestApp()
    const page = await (await t.request('GET', '/docs')).text()
    expect(page).toContain('/docs-assets/swagger-ui-bundle.js')
    expect(page).toContain('/docs-assets/swagger-ui.css')
    expect(page).not.toMatch(/https?:\/\//)
    const bundle = await t.request('GET', '/docs-assets/swagger-ui-bundle.js')
    expect(bundle.status).toBe(200)
    expect(bundle.headers.get('content-type')).toContain('javascript')
    // Over HTTP: the request id joins the asset's own headers on the Response the route built
    // (request-context's sendAsBuilt), and the file keeps its length.
    const served = await fetch(`${t.listen()}/docs-assets/swagger-ui.css`)
    expect(served.headers.get('x-request-id')).toMatch(/^req_/)
    expect(served.headers.get('cache-control')).toBe('public, max-age=86400')
    expect(Number(served.headers.get('content-length'))).toBe((await served.arrayBuffer()).byteLength)
    expect((await bundle.arrayBuffer()).byteLength).toBeGreaterThan(500_000)
    expect((await t.request('GET', '/docs-assets/swagger-ui.css')).status).toBe(200)
    // From /docs/ the page's relative spec URL would miss: it redirects to /docs.
    const slash = await t.request('GET', '/docs/')
    expect(slash.status).toBe(308)
    // Relative, never built from the Host header (a 308 may be cached and served to others).
    expect(slash.headers.get('location')).toBe('/docs')
    const forged = await t.app.handle(new Request('http://evil.example/docs/'))
    expect(forged.headers.get('location')).toBe('/docs')
    // QA: with a query it was the page itself, which then found no document at /docs/openapi.json.
    const queried = await t.request('GET', '/docs/?x=1')
    expect([queried.status, queried.headers.get('location')]).toEqual([308, '/docs?x=1'])
    await t.close()
  })

  test('"Authorize" in /docs works: PKCE, and a served redirect page a registered client completes the code flow through', async () => {
    const t = await buildTestApp()
    const page = await (await t.request('GET', '/docs')).text()
    // Swagger UI takes PKCE from initOAuth only, and sends oauth2RedirectUrl as redirect_uri: absolute, the served page.
    expect(page).toContain('initOAuth({ usePkceWithAuthorizationCodeGrant: true })')
    expect(page).toContain('oauth2RedirectUrl: location.origin + "/docs/oauth2-redirect.html"')
    const redirect = await t.request('GET', '/docs/oauth2-redirect.html?code=c&state=s')
    expect(redirect.status).toBe(200)
    expect(redirect.headers.get('content-type')).toBe('text/html; charset=utf-8')
    expect(redirect.headers.get('cache-control')).toBe('no-store')
    const html = await redirect.text()
    expect(html).not.toMatch(/https?:\/\/|<script src/)
    // Its one inline script (swagger-ui-dist's) is allowed by its hash; nothing else is.
    const script = /<script>([\s\S]*)<\/script>/.exec(html)![1]!
    expect(script).toContain('window.opener.swaggerUIRedirectOauth2')
    const hash = new Bun.CryptoHasher('sha256').update(script).digest('base64')
    expect(redirect.headers.get('content-security-policy')).toBe(`default-src 'none'; script-src 'sha256-${hash}'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`)
    // The scheme's description names the redirect URI to register.
    const spec = await json(await t.request('GET', '/openapi.json'))
    expect(spec.components.securitySchemes.oauth2.description).toContain('/docs/oauth2-redirect.html')

    // What Swagger UI sends, for a public client registered with that page (loopback http; the
    // browser case is test/e2e/docs-oauth.test.ts): an S256 challenge, then the verifier.
    const org = await t.createOrg()
    const redirectUri = 'http://localhost/docs/oauth2-redirect.html'
    const clientId = await registerClient(t, { client_name: 'API docs', redirect_uris: [redirectUri] })
    const { verifier, challenge } = pkce()
    const landed = await approve(t, { clientId, challenge, redirectUri, scope: 'cli:inference' }, org.adminKey)
    expect(landed.origin + landed.pathname).toBe(redirectUri)
    const code = landed.searchParams.get('code')!
    const token = await postForm(t, '/oauth/token', { grant_type: 'authorization_code', code, client_id: clientId, redirect_uri: redirectUri, code_verifier: verifier })
    expect(token.status).toBe(200)
    expect((await json(token)).access_token).toMatch(/^svc_cli_/)
    await t.close()
  })
})
