import { expect } from 'bun:test'
import { sql } from 'drizzle-orm'
import { apiKeys } from '../../src/db/schema'
import { json, type TestApp, type TestOrg } from './harness'

// Key management through HTTP for the test/routes/api-keys*.test.ts suites: requests as an
// organization's admin, and the /api/v1 error envelope checked exactly.

export const KEYS = '/api/v1/api-keys'
export const NOW_ISO = '2026-01-15T12:00:00.000Z' // FakeClock's starting instant
export const MINUTE = 60_000
export const DAY = 86_400_000
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
/** The fields every listed key has. */
export const ALWAYS = ['admin', 'created_at', 'id', 'name', 'status']

/** Key requests on the app and organization `current` returns (read at call time: both change per test). */
export function keysApi(current: () => { t: TestApp; org: TestOrg }) {
  const create = (body: unknown, key = current().org.adminKey, headers?: Record<string, string>): Promise<Response> =>
    current().t.request('POST', KEYS, { body, key, headers })

  /** Creates a key through the API and returns the `key` object of the 201 response. */
  async function createOk(body: Record<string, unknown>, key = current().org.adminKey): Promise<Record<string, any>> {
    const response = await create(body, key)
    if (response.status !== 201) throw new Error(`expected 201, got ${response.status}: ${await response.text()}`)
    return (await json(response)).key
  }

  async function list(key = current().org.adminKey): Promise<Array<Record<string, any>>> {
    const response = await current().t.request('GET', KEYS, { key })
    expect(response.status).toBe(200)
    return (await json(response)).keys
  }

  const listed = async (id: string, key = current().org.adminKey): Promise<Record<string, any> | undefined> =>
    (await list(key)).find(entry => entry.id === id)

  const revoke = (id: string, key = current().org.adminKey): Promise<Response> => current().t.request('DELETE', `${KEYS}/${id}`, { key })

  /** Rows in api_keys across every organization: the ground truth for "nothing was written". */
  async function rowCount(): Promise<number> {
    const rows = await current().t.deps.database.db.select({ n: sql<bigint>`count(*)` }).from(apiKeys)
    return Number(rows[0]!.n)
  }

  /**
   * Asserts the /api/v1 error envelope: exactly {error: {code, message, param?, request_id}},
   * request_id equal to the x-request-id header. `param` undefined means the field is absent.
   */
  async function expectApiError(response: Response, status: number, code: string, param?: string): Promise<{ message: string }> {
    const text = await response.text()
    expect(`${response.status} ${text}`).toStartWith(`${status} `)
    expect(response.headers.get('content-type')).toStartWith('application/json')
    const requestId = response.headers.get('x-request-id')
    expect(requestId).toBeTruthy()
    const body = JSON.parse(text)
    expect(Object.keys(body)).toEqual(['error'])
    const expectedKeys = param === undefined ? ['code', 'message', 'request_id'] : ['code', 'message', 'param', 'request_id']
    expect(Object.keys(body.error).sort()).toEqual(expectedKeys)
    expect(body.error.code).toBe(code)
    expect(typeof body.error.message).toBe('string')
    expect(body.error.message.length).toBeGreaterThan(0)
    if (param !== undefined) expect(body.error.param).toBe(param)
    expect(body.error.request_id).toBe(requestId!)
    // Nothing secret ever leaks into an error.
    expect(text).not.toContain(current().org.adminKey)
    return body.error
  }

  /** Sends a create that must fail, and checks that no key was written. */
  async function expectCreateRejected(send: () => Promise<Response>, status: number, code: string, param?: string) {
    const before = await rowCount()
    const listedBefore = (await list()).length
    const error = await expectApiError(await send(), status, code, param)
    expect(await rowCount()).toBe(before)
    expect(await list()).toHaveLength(listedBefore)
    return error
  }

  const createRejected = (body: unknown, param: string | undefined, status = 400, code = 'invalid_request') =>
    expectCreateRejected(() => create(body), status, code, param)

  return { create, createOk, list, listed, revoke, expectApiError, expectCreateRejected, createRejected }
}
