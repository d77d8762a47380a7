import { describe, expect, test } from 'bun:test'
import { buildTestApp, json } from '../support/harness'

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
      expect.arrayContaining(['POST /api/v1/api-keys', 'GET /api/v1/api-keys', 'DELETE /api/v1/api-keys/{key_id}', 'GET /healthz', 'GET /readyz']),
    )
    for (const { name, operation } of operations) {
      expect(operation.summary ? name : `${name} lacks a summary`).toBe(name)
      expect(operation.tags?.length ? name : `${name} lacks tags`).toBe(name)
      for (const [status, reply] of Object.entries(operation.responses ?? {}) as Array<[string, any]>) {
        if (status === '204') continue
        // JSON everywhere, except plain-text bodies such as /metrics' Prometheus text.
        const schema = reply.content?.['application/json']?.schema ?? reply.content?.['text/plain']?.schema
        expect(schema ? name : `${name} ${status} has no schema`).toBe(name)
      }
      if (name.startsWith('POST')) expect(operation.requestBody.content['application/json'].schema.type).toBe('object')
    }
    await t.close()
  })

  test('/docs serves Swagger UI from the gateway itself, never a CDN', async () => {
    const t = await buildTestApp()
    const page = await (await t.request('GET', '/docs')).text()
    expect(page).toContain('/docs-assets/swagger-ui-bundle.js')
    expect(page).toContain('/docs-assets/swagger-ui.css')
    expect(page).not.toMatch(/https?:\/\//)
    const bundle = await t.request('GET', '/docs-assets/swagger-ui-bundle.js')
    expect(bundle.status).toBe(200)
    expect(bundle.headers.get('content-type')).toContain('javascript')
    expect((await bundle.arrayBuffer()).byteLength).toBeGreaterThan(500_000)
    expect((await t.request('GET', '/docs-assets/swagger-ui.css')).status).toBe(200)
    // From /docs/ the page's relative spec URL would miss: it redirects to /docs.
    const slash = await t.request('GET', '/docs/')
    expect(slash.status).toBe(308)
    expect(new URL(slash.headers.get('location')!).pathname).toBe('/docs')
    await t.close()
  })
})
