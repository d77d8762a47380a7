import { describe, expect, test } from 'bun:test'
import { CLI_CLIENT } from '../../src/oauth/clients'
import { eachTestWithOrg, json, type TestApp } from '../support/harness'
import { authorizeQuery, pkce, postForm, readConsentPage, registerClient } from '../support/oauth'

// Anyone may register a client and name it. A client named like the built-in one of `svc login`
// got a device page identical to the CLI's, so a phishing link could pass for a real sign-in.
// The built-in name is reserved, and the consent pages mark every registered client as
// third-party with its client id, which its registrant cannot choose.

let t: TestApp
eachTestWithOrg(app => void (t = app))

const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code'

/** The device page a person would open for a device authorization started by `clientId`. */
async function devicePage(clientId: string): Promise<string> {
  const started = await json(await postForm(t, '/oauth/device_authorization', { client_id: clientId, scope: 'cli:inference' }))
  const page = await t.request('GET', `/oauth/device?user_code=${started.user_code}`)
  expect(page.status).toBe(200)
  return (await readConsentPage(page)).html
}

describe('the built-in client name is reserved at registration', () => {
  test('its name in any case, spacing, compatibility form or with invisible characters is invalid_client_metadata', async () => {
    const lookalikes = [
      CLI_CLIENT.name,
      ' SVC  Command-Line\tClient ',
      'ｓｖｃ ｃｏｍｍａｎｄ-ｌｉｎｅ ｃｌｉｅｎｔ', // fullwidth: NFKC folds it
      'svc\u00a0command-line\u3000client', // no-break and ideographic spaces
      'svc\u200bcommand-line client', // a zero-width space
      'svccommand-lineclient',
    ]
    for (const name of lookalikes) {
      const response = await t.request('POST', '/oauth/register', { body: { client_name: name, grant_types: [DEVICE_GRANT] } })
      expect(response.status).toBe(400)
      const body = await json(response)
      expect(body.error).toBe('invalid_client_metadata')
      expect(body.error_description).toContain('reserved')
    }
    // A name that merely contains it is someone else's and allowed (the page marks it third-party).
    const other = await t.request('POST', '/oauth/register', { body: { client_name: 'svc command-line client helper', grant_types: [DEVICE_GRANT] } })
    expect(other.status).toBe(201)
  })
})

describe('consent pages tell a registered client from the built-in one', () => {
  test('device page: a registered client is marked third-party with its id; svc login’s page is not', async () => {
    const clientId = await registerClient(t, { client_name: 'svc command-line client (tm)', grant_types: [DEVICE_GRANT] })
    const fake = await devicePage(clientId)
    expect(fake).toContain('<h1>Authorize svc command-line client (tm) (third-party application)</h1>')
    expect(fake).toContain(`Client id: <code>${clientId}</code>`)
    const real = await devicePage(CLI_CLIENT.id)
    expect(real).toContain(`<h1>Authorize ${CLI_CLIENT.name}</h1>`)
    expect(real).not.toContain('third-party')
  })

  test('authorize page: a registered client is marked third-party with its id, escaped', async () => {
    const clientId = await registerClient(t, { client_name: 'Claude <b>' })
    const page = await t.request('GET', authorizeQuery({ clientId, challenge: pkce().challenge }))
    expect(page.status).toBe(200)
    const { html } = await readConsentPage(page)
    expect(html).toContain('<title>Authorize Claude &#60;b&#62; (third-party application)</title>')
    expect(html).toContain('<strong>Third-party application.</strong>')
    expect(html).toContain(`Client id: <code>${clientId}</code>`)
    expect(html).not.toContain('<b>')
  })
})
