import { expect, test } from 'bun:test'
import { buildTestApp, json } from '../support/harness'

// QA: /openapi.json depended on which routes had run before its first fetch. Elysia builds a
// route's reply validator at its first request and then writes `additionalProperties: false` on
// the reply schema object itself, which routes share (the error envelopes) and the document
// describes; the document is built once, at its first fetch. After one GET /api/v1/billing/balance,
// 45 error schemas said `additionalProperties: false`, and two instances could serve different
// documents. The schemas now say it from the start (settleReplySchemas).

const document = async () => {
  const t = await buildTestApp()
  const spec = await json(await t.request('GET', '/openapi.json'))
  await t.close()
  return spec
}

test('the document is the same whether every route has run before its first fetch or none has', async () => {
  const before = await document()
  const t = await buildTestApp()
  const org = await t.createOrg()
  for (const route of t.app.routes) {
    const path = route.path.replace(/:[A-Za-z_]+/g, 'x').replace(/\*$/, 'x')
    const response = await t.request(route.method, path, { key: org.adminKey, body: ['GET', 'DELETE', 'OPTIONS'].includes(route.method) ? undefined : {} })
    await response.arrayBuffer()
  }
  await t.close()
  expect(await document()).toEqual(before)
  // The value the reply validators apply, stated before any of them was built.
  const error = (path: string) => before.paths[path].get.responses['400'].content['application/json'].schema
  expect([error('/api/v1/billing/balance').additionalProperties, error('/v1/models').anyOf.map((each: { additionalProperties?: boolean }) => each.additionalProperties)]).toEqual([false, [false, false]])
})
