import { describe, expect, test } from 'bun:test'
import { createPlanOrg, json, type TestApp } from '../support/harness'
import { buildWebApp, type FakeResolver } from '../support/fake-web'
import { CREDIT, PRICE, webFetchTools } from '../support/web-fetch'

// The text a fetched page comes back as, through the HTTP route (the hosted web_fetch reads pages
// the same way): text pages as written, HTML as a reader sees it.

let t: TestApp
let resolver: FakeResolver
const { serve, spent, fetchUrls, expectRefused } = webFetchTools(() => t)

async function setup() {
  ;({ t, resolver } = await buildWebApp())
  return createPlanOrg(t, { name: 'text', keyName: 'web', credit: CREDIT })
}

/** The content of each page `pages` serves, fetched in one call from a site that serves them by path. */
async function contents(key: string, pages: Record<string, Response>): Promise<string[]> {
  const site = serve((_, url) => pages[url.pathname]!)
  resolver.set('text.acme-web.com', ['127.0.0.1'])
  const response = await fetchUrls(key, Object.keys(pages).map(path => `http://text.acme-web.com:${site.port}${path}`))
  expect(response.status).toBe(200)
  return (await json(response)).results.map((result: { content: string }) => result.content)
}

describe('text pages', () => {
  test('plain text, YAML and Markdown keep their indentation, runs of spaces and blank lines', async () => {
    // Before: they went through HTML's whitespace cleaning: "def f(x):\nif x:\nreturn 1".
    const { orgId, key } = await setup()
    const code = 'def f(x):\n    if x:\n        return 1'
    const yaml = 'server:\r\n  port: 80\r\n  hosts:\r\n    - a   # aligned\r\n    - b\r\n'
    const markdown = '\n\n# Title\n\n\n    indented code\n\n| a  | b  |\n|----|----|\n'
    const got = await contents(key, {
      '/f.py': new Response(code, { headers: { 'content-type': 'text/plain; charset=utf-8' } }),
      '/c.yaml': new Response(yaml, { headers: { 'content-type': 'text/yaml' } }),
      '/r.md': new Response(markdown, { headers: { 'content-type': 'text/markdown' } }),
    })
    // Line endings become "\n"; blank lines at the start and whitespace at the end go.
    expect(got).toEqual([code, 'server:\n  port: 80\n  hosts:\n    - a   # aligned\n    - b', '# Title\n\n\n    indented code\n\n| a  | b  |\n|----|----|'])
    expect(await spent(orgId)).toBe(3n * PRICE)
  })

  test('YAML, TOML and JSON Lines under their application/ types are read as text', async () => {
    // Before: application/yaml (RFC 9512) and the others were refused as "not text-like".
    const { orgId, key } = await setup()
    // Three URLs per call at most: two calls.
    const yaml = await contents(key, {
      '/a.yaml': new Response('a:\n  b: 1\n', { headers: { 'content-type': 'application/yaml' } }),
      '/b.yml': new Response('- x\n', { headers: { 'content-type': 'application/x-yaml; charset=utf-8' } }),
      '/c.yaml': new Response('kind: Pod\n', { headers: { 'content-type': 'application/openapi+yaml' } }),
    })
    const others = await contents(key, {
      '/d.toml': new Response('[server]\nport = 80\n', { headers: { 'content-type': 'application/toml' } }),
      '/e.jsonl': new Response('{"a":1}\n{"a":2}\n', { headers: { 'content-type': 'application/x-ndjson' } }),
    })
    expect([...yaml, ...others]).toEqual(['a:\n  b: 1', '- x', 'kind: Pod', '[server]\nport = 80', '{"a":1}\n{"a":2}'])
    expect(await spent(orgId)).toBe(5n * PRICE)
  })
})

describe('binary data labelled as text', () => {
  test('is refused wherever it starts, not only in the first 8 KiB; control characters spread through a long text are not binary', async () => {
    // QA: 9000 letters then a NUL, or 8200 letters then 20 KB of binary bytes, passed as text and were billed.
    const { orgId, key } = await setup()
    // Every byte value but NUL, in a scrambled order: what an image or archive holds.
    const noise = Uint8Array.from({ length: 20_000 }, (_, index) => 1 + ((index * 167 + 13) % 255))
    const pages: Record<string, Response> = {
      '/nul.txt': new Response(`${'a'.repeat(9000)}\u0000`, { headers: { 'content-type': 'text/plain' } }),
      '/noise.txt': new Response(Buffer.concat([Buffer.from('a'.repeat(8200)), noise]), { headers: { 'content-type': 'text/plain' } }),
      '/noise.json': new Response(Buffer.concat([Buffer.from(`{"a":"${'a'.repeat(8200)}`), noise]), { headers: { 'content-type': 'application/json' } }),
      '/noise.html': new Response(Buffer.concat([Buffer.from(`<p>${'a'.repeat(9000)}</p>`), noise]), { headers: { 'content-type': 'text/html' } }),
    }
    const site = serve((_, url) => pages[url.pathname]!)
    resolver.set('text.acme-web.com', ['127.0.0.1'])
    for (const path of Object.keys(pages)) {
      await expectRefused(await fetchUrls(key, [`http://text.acme-web.com:${site.port}${path}`]), orgId, 'binary')
    }
    // One bell a line of 80 characters (1.2%), through 48 KB (the test config reads 64 KiB).
    const bell = `${'a line of a terminal capture, ringing its bell at the end as it finishes a step\u0007\n'.repeat(600)}`
    expect(await contents(key, { '/bells.txt': new Response(bell, { headers: { 'content-type': 'text/plain' } }) })).toEqual([bell.replaceAll('\u0007', '').trimEnd()])
  })
})

describe('HTML pages', () => {
  test('a stray NUL or control character in an HTML page is dropped, not taken for binary data; PNG bytes labelled HTML are still refused', async () => {
    // Before: one NUL made the page "labelled text/html but holds binary data", a 400.
    const { orgId, key } = await setup()
    const article = `<html><head><title>Notes</title></head><body><h1>Release notes</h1><p>${'Fixed a bug in the parser. '.repeat(12)}</p>` +
      '<p>Version\u00002.1\u0007 ships today.</p></body></html>'
    const got = await contents(key, { '/notes': new Response(article, { headers: { 'content-type': 'text/html' } }) })
    expect(got[0]!.endsWith('Fixed a bug in the parser.\n\nVersion2.1 ships today.')).toBe(true)
    expect(await spent(orgId)).toBe(PRICE)
    const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64')
    const site = serve(() => new Response(png, { headers: { 'content-type': 'text/html' } }))
    const refused = await fetchUrls(key, [`http://text.acme-web.com:${site.port}/logo.png`])
    expect(refused.status).toBe(400)
    expect((await json(refused)).error.message).toContain('holds binary data')
    expect(await spent(orgId)).toBe(PRICE)
  })

  test('an XHTML page reads on after a self-closed <iframe/>, <textarea/> or <script/>; in an HTML page the "/" means nothing', async () => {
    // Before: XHTML was parsed as HTML, so after <iframe src="…"/> every element was inside the (skipped) iframe: content "Intro".
    const { key } = await setup()
    const body = '<p>Intro</p><iframe src="https://video.example/embed"/><p>Watch above.</p><textarea name="q"/><p>Comment below.</p>' +
      '<script src="/app.js"/><p>The end.</p></body></html>'
    const xhtml = `<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>Clip</title></head><body>${body}`
    const got = await contents(key, {
      '/clip.xhtml': new Response(xhtml, { headers: { 'content-type': 'application/xhtml+xml' } }),
      '/clip.html': new Response(`<!DOCTYPE html><html><head><title>Clip</title></head><body>${body}`, { headers: { 'content-type': 'text/html' } }),
    })
    expect(got).toEqual(['Intro\n\nWatch above.\n\nComment below.\n\nThe end.', 'Intro'])
  })
})
