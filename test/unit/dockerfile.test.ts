import { expect, test } from 'bun:test'
import { join } from 'node:path'
import { loadConfig } from '../../src/config/load'

// No Docker daemon in CI, so the image's instructions are checked against what the gateway does.
const REPO = join(import.meta.dir, '..', '..')

test('every docker run line leaves the drain its time before Docker kills the process', async () => {
  // `docker stop` sends SIGTERM, then SIGKILL after 10 s unless told otherwise: shorter than the
  // default drain (shutdown.drain_timeout_s), so streams still in flight would be cut mid-answer.
  const drainSeconds = loadConfig({}).shutdown.drainTimeoutMs / 1000
  const text = (await Promise.all(['Dockerfile', 'README.md'].map(name => Bun.file(join(REPO, name)).text()))).join('\n')
  const lines = [...text.matchAll(/docker run [^\n`]*/g)].map(match => match[0])
  expect(lines.length).toBeGreaterThanOrEqual(2)
  for (const line of lines) {
    const timeout = Number(/--stop-timeout[ =](\d+)/.exec(line)?.[1] ?? 10)
    expect({ line, enough: timeout > drainSeconds }).toEqual({ line, enough: true })
  }
})

test("the image's user and group both have the id USER names", async () => {
  const dockerfile = await Bun.file(join(REPO, 'Dockerfile')).text()
  const [uid, gid] = /^USER (\d+):(\d+)$/m.exec(dockerfile)!.slice(1)
  // useradd --user-group picks a system gid of its own: the group is created first with the same id.
  expect(dockerfile).toContain(`groupadd --system --gid ${gid} svc`)
  expect(dockerfile).toContain(`useradd --system --uid ${uid} --gid ${gid} `)
  expect(dockerfile).not.toContain('--user-group')
})
