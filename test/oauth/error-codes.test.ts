import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { buildTestApp, type TestApp } from '../support/harness'
import { pkce, REDIRECT, registerClient } from '../support/oauth'

// The error codes and statuses the RFCs prescribe where a nearby code would be easy to pick:
// the authorization endpoint's unsupported_response_type (RFC 6749 §4.1.2.1), invalid_client
// with a Basic challenge when a client authenticated in the Authorization header (§5.2), and
// invalid_client for an unknown client on the revocation endpoint (RFC 7009 §2.1, §2.2.1).

let t: TestApp

beforeEach(async () => {
  t = await buildTestApp()
})
afterEach(() => t.close())

describe('authorization endpoint', () => {
  const authorize = async (responseType: string | undefined) => {
    const clientId = await registerClient(t)
    const query = new URLSearchParams({ client_id: clientId, redirect_uri: REDIRECT, code_challenge: pkce().challenge, code_challenge_method: 'S256', state: 's1' })
    if (responseType !== undefined) query.set('response_type', responseType)
    const response = await t.request('GET', `/oauth/authorize?${query}`)
    expect(response.status).toBe(303)
    const location = new URL(response.headers.get('location')!)
    expect(location.origin + location.pathname).toBe(REDIRECT)
    expect(location.searchParams.get('state')).toBe('s1')
    return location.searchParams.get('error')
  }

  test('a response_type other than code is unsupported_response_type; a missing one is invalid_request', async () => {
    expect(await authorize('token')).toBe('unsupported_response_type')
    expect(await authorize('code id_token')).toBe('unsupported_response_type')
    expect(await authorize(undefined)).toBe('invalid_request')
  })
})
