import { expect, test } from 'bun:test'
import { isDatabaseOutage, openDatabase, pingDatabase } from '../../src/db/client'

// src/db/client.ts imports libSQL's remote clients only for a server URL (a local file uses the
// sqlite3 client alone): both paths open, and an unreachable server reads as an outage.

test('a local database opens through the sqlite3 client and answers', async () => {
  const database = await openDatabase('file::memory:')
  expect(await pingDatabase(database)).toBe(true)
  expect((await database.client.execute('SELECT 41 + 1 AS n')).rows[0]!.n).toBe(42n)
  database.close()
})

test('a server URL opens through the remote client, imported on demand; unreachable is an outage', async () => {
  // A port that was just free: nothing listens there, so every query fails to connect.
  const probe = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() })
  const port = probe.port!
  probe.stop(true)
  const database = await openDatabase(`http://127.0.0.1:${port}`)
  expect(await pingDatabase(database)).toBe(false)
  const error = await database.client.execute('SELECT 1').catch(failure => failure)
  expect(isDatabaseOutage(error)).toBe(true)
  database.close()
})
