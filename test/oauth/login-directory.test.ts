import { afterEach, beforeEach, expect, test } from 'bun:test'
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { oauthGrants } from '../../src/db/schema'
import { loadClientConfig } from '../../src/config/client'
import { login, readLogin } from '../../src/operator/login'
import { captureIo } from '../support/cli'
import { eachTestWithOrg, type TestApp, type TestOrg } from '../support/harness'
import { readConsentPage } from '../support/oauth'

// `svc login` where the token cannot be kept (QA cli #3): before, the person approved, the token
// was minted, then the command failed on the directory and the grant stayed active, with no
// copy for svc logout to revoke.

let t: TestApp
let org: TestOrg
eachTestWithOrg((app, created) => void ([t, org] = [app, created]))

let server: ReturnType<typeof Bun.serve>
let base: string
let dir: string
beforeEach(() => {
  server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: t.app.fetch })
  base = `http://127.0.0.1:${server.port}`
  dir = mkdtempSync(join(tmpdir(), 'svc-login-dir-'))
})
afterEach(() => {
  server.stop(true)
  rmSync(dir, { recursive: true, force: true })
})

/** The person approves on the device page the CLI printed, as a browser would post it. */
async function approve(printed: string[]): Promise<void> {
  const link = printed.join('\n').match(/open (\S+)/)![1]!
  const { fields, cookie } = await readConsentPage(await fetch(link))
  const decided = await fetch(`${base}/oauth/device`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie, origin: base },
    body: new URLSearchParams({ ...fields, api_key: org.adminKey, decision: 'approve' }),
  })
  expect(decided.status).toBe(200)
}

const grants = () => t.deps.database.db.select({ revokedAtMs: oauthGrants.revokedAtMs }).from(oauthGrants)

test('a directory that cannot be created stops login before the sign-in starts', async () => {
  const file = join(dir, 'file')
  writeFileSync(file, '')
  const config = loadClientConfig({ SVC_CONFIG_DIR: join(file, 'svc') })
  const { io, out, err } = captureIo()
  // A sign-in that started would wait here: it ends instead, so the test cannot hang on it.
  const env = { now: () => Date.now(), sleep: async () => Promise.reject(new Error('the sign-in started')) }
  await expect(login(config, ['--url', base], io, env)).rejects.toThrow(`cannot keep the svc login token in ${join(file, 'svc')}: ENOTDIR`)
  // No link printed, no grant.
  expect({ out, err }).toEqual({ out: [], err: [] })
  expect(await grants()).toEqual([])
})

test('a token that cannot be saved after the approval is revoked, and the error says so', async () => {
  const config = loadClientConfig({ SVC_CONFIG_DIR: join(dir, 'svc') })
  const { io, out, err } = captureIo()
  const env = {
    now: () => Date.now(),
    async sleep(ms: number) {
      t.clock.advance(ms)
      await approve(err)
      // The directory passed its check; the file's place is then taken (rename onto a directory fails).
      mkdirSync(join(dir, 'svc', 'credentials.json'), { recursive: true })
    },
  }
  await expect(login(config, ['--url', base], io, env)).rejects.toThrow(
    new RegExp(`^cannot keep the svc login token in ${join(dir, 'svc', 'credentials.json')}: .*; the sign-in was revoked at the gateway$`),
  )
  expect(out).toEqual([])
  expect(readLogin(config)).toBeUndefined()
  // Nor a copy under the temporary name it was written to.
  expect(readdirSync(join(dir, 'svc'))).toEqual(['credentials.json'])
  expect(await grants()).toEqual([{ revokedAtMs: expect.any(Number) }])
})
