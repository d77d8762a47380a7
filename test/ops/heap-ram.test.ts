import { afterEach, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { cgroupLimit, HEAP_RAM_CAP, HEAP_RAM_VARIABLE, heapRamSize } from '../../src/lib/heap-ram'
import { webConfigYaml } from '../support/fake-web'
import { gatewayWorkspace, openDeps, startGateway, type GatewayProcess, type GatewayWorkspace } from '../support/gateway-process'
import { poll } from '../support/poll'

const GiB = 1024 ** 3

test('a host above the cap sizes the heap for the cap; a smaller host is left alone', () => {
  expect(heapRamSize({}, 24 * GiB, undefined)).toBe(HEAP_RAM_CAP)
  expect(heapRamSize({}, 4 * GiB, undefined)).toBeUndefined()
  expect(heapRamSize({}, HEAP_RAM_CAP, undefined)).toBeUndefined()
})

test("a container's memory limit below the host's RAM is what the heap is sized for", () => {
  expect(heapRamSize({}, 24 * GiB, 2 * GiB)).toBe(2 * GiB)
  expect(heapRamSize({}, 4 * GiB, 1 * GiB)).toBe(1 * GiB)
  // A limit above the cap (or above the host) changes nothing beyond the cap.
  expect(heapRamSize({}, 24 * GiB, 16 * GiB)).toBe(HEAP_RAM_CAP)
  expect(heapRamSize({}, 4 * GiB, 64 * GiB)).toBeUndefined()
})

test('an operator-set value is kept, whatever it is', () => {
  expect(heapRamSize({ [HEAP_RAM_VARIABLE]: String(24 * GiB) }, 24 * GiB, 2 * GiB)).toBeUndefined()
  expect(heapRamSize({ [HEAP_RAM_VARIABLE]: '' }, 24 * GiB, undefined)).toBe(HEAP_RAM_CAP)
})

test('cgroup limits: v2 "max" and v1\'s page-rounded "no limit" are no limit; a number is one', () => {
  const files = (v2: string | undefined, v1: string | undefined) => (path: string) => {
    const text = path.endsWith('memory.max') ? v2 : v1
    if (text === undefined) throw new Error('ENOENT')
    return text
  }
  expect(cgroupLimit(files('max\n', undefined))).toBeUndefined()
  expect(cgroupLimit(files('2147483648\n', undefined))).toBe(2 * GiB)
  expect(cgroupLimit(files(undefined, '9223372036854771712\n'))).toBeUndefined()
  expect(cgroupLimit(files(undefined, '1073741824\n'))).toBe(GiB)
  expect(cgroupLimit(files(undefined, undefined))).toBeUndefined()
})

/** A fake filesystem of `files` (path → text): reading any other path fails as a missing file does. */
const filesystem = (files: Record<string, string>) => (path: string) => {
  if (!Object.hasOwn(files, path)) throw new Error(`ENOENT: ${path}`)
  return files[path]!
}

test("the process's own cgroup and its ancestors: a systemd unit's MemoryMax= on a host is seen (QA: only the root was read)", () => {
  // systemd puts the service in its own cgroup; the host's root cgroup has no memory.max at all.
  const unit = { '/proc/self/cgroup': '0::/system.slice/svc.service\n', '/sys/fs/cgroup/system.slice/svc.service/memory.max': '2147483648\n', '/sys/fs/cgroup/system.slice/memory.max': 'max\n' }
  expect(cgroupLimit(filesystem(unit))).toBe(2 * GiB)
  // A limit binds everything below it: the least along the path, the slice's here.
  expect(cgroupLimit(filesystem({ ...unit, '/sys/fs/cgroup/system.slice/memory.max': '1073741824\n' }))).toBe(GiB)
  // A container (its own cgroup namespace) is at the root of what it sees.
  expect(cgroupLimit(filesystem({ '/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/memory.max': '536870912\n' }))).toBe(GiB / 2)
  // A path that names nothing under the mount (a container given only its own cgroup): its root.
  expect(cgroupLimit(filesystem({ '/proc/self/cgroup': '0::/docker/abc\n', '/sys/fs/cgroup/memory.max': '536870912\n' }))).toBe(GiB / 2)
  expect(cgroupLimit(filesystem({ '/proc/self/cgroup': '0::/user.slice/user-1000.slice/session-1.scope\n' }))).toBeUndefined()
})

test("cgroup v1: the memory controller's own cgroup and its ancestors, beside the unified hierarchy's", () => {
  const v1 = '12:pids:/system.slice/svc.service\n4:cpu,memory:/system.slice/svc.service\n0::/system.slice/svc.service\n'
  const root = { '/sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712\n' }
  expect(cgroupLimit(filesystem({ ...root, '/proc/self/cgroup': v1, '/sys/fs/cgroup/memory/system.slice/svc.service/memory.limit_in_bytes': '1073741824\n' }))).toBe(GiB)
  expect(cgroupLimit(filesystem({ ...root, '/proc/self/cgroup': v1 }))).toBeUndefined()
  // /proc/self/cgroup unreadable: the mounts' roots, as before.
  expect(cgroupLimit(filesystem({ '/sys/fs/cgroup/memory/memory.limit_in_bytes': '1073741824\n' }))).toBe(GiB)
})

// The real `svc serve`: it re-executes itself (same pid) with the variable set, then serves.
let workspace: GatewayWorkspace | undefined
let gateway: GatewayProcess | undefined
let closedBoot: ReturnType<typeof Bun.spawn> | undefined
afterEach(async () => {
  gateway?.process.kill('SIGKILL')
  await gateway?.exited
  closedBoot?.kill('SIGKILL')
  await closedBoot?.exited
  workspace?.remove()
})

const environOf = (pid: number) =>
  new Map(readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean).map(entry => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)] as const))

test.skipIf(process.platform !== 'linux')('svc serve runs with the heap sized for this host, and answers', async () => {
  workspace = gatewayWorkspace('svc-heap-ram-', webConfigYaml())
  const { [HEAP_RAM_VARIABLE]: _, ...env } = process.env
  const expected = heapRamSize(env)
  gateway = await startGateway({ ...workspace.env })
  expect(environOf(gateway.process.pid).get(HEAP_RAM_VARIABLE)).toBe(expected === undefined ? undefined : String(expected))
  expect((await fetch(`${gateway.url}/readyz`)).status).toBe(200)
}, 30_000)

test.skipIf(process.platform !== 'linux')("svc serve keeps the operator's value", async () => {
  workspace = gatewayWorkspace('svc-heap-ram-', webConfigYaml())
  gateway = await startGateway({ ...workspace.env, [HEAP_RAM_VARIABLE]: String(12 * GiB) })
  expect(environOf(gateway.process.pid).get(HEAP_RAM_VARIABLE)).toBe(String(12 * GiB))
  expect((await fetch(`${gateway.url}/readyz`)).status).toBe(200)
}, 30_000)

// A closed stdout or stderr (`svc serve >&-`) is a /dev/null after the re-execution, as an
// operator's own would look: before (QA), the first boot's key was "printed" there and stayed active.
const CLI = join(import.meta.dir, '..', '..', 'src', 'cli.ts')
const LARGE_HOST = join(import.meta.dir, '..', 'support', 'large-host.ts')

/** A first boot of `svc serve`, re-executed as on a large host, with `redirect` applied by a shell. */
function reexecutedFirstBoot(redirect: string) {
  workspace = gatewayWorkspace('svc-heap-ram-closed-', webConfigYaml())
  const { [HEAP_RAM_VARIABLE]: _, ...env } = process.env
  const child = (closedBoot = Bun.spawn(['sh', '-c', `exec "$0" "$@" ${redirect}`, process.execPath, '--preload', LARGE_HOST, CLI, 'serve'], {
    env: { ...env, ...workspace.env, PORT: '0', SVC_BOOTSTRAP: '1' },
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  }))
  let stderr = ''
  void (async () => {
    for await (const chunk of child.stderr) stderr += new TextDecoder().decode(chunk)
  })()
  return { child, stderr: () => stderr }
}

const keyStatuses = async () => {
  const deps = await openDeps(workspace!.env)
  try {
    return (await deps.database.client.execute("SELECT status FROM api_keys WHERE name = 'bootstrap admin'")).rows.map(row => row.status)
  } finally {
    await deps.close()
  }
}

test.skipIf(process.platform !== 'linux')('a re-executed first boot with stdout closed prints its key on stderr', async () => {
  const { child, stderr } = reexecutedFirstBoot('>&-')
  try {
    await poll('the key on stderr', 200, 50, () => (stderr().includes('Authorization: Bearer z_sk_') ? true : undefined))
    // The log lines would vanish into Bun's /dev/null: that is said once too.
    await poll('the log notice on stderr', 200, 50, () => (stderr().includes('log lines could not be written to standard output (it is closed)') ? true : undefined))
    expect(environOf(child.pid).get(HEAP_RAM_VARIABLE)).toBe(String(heapRamSize({}, 64 * GiB)))
    expect(await keyStatuses()).toEqual(['active'])
  } finally {
    child.kill('SIGTERM')
  }
  expect(await child.exited).toBe(0)
}, 30_000)

test.skipIf(process.platform !== 'linux')('a re-executed first boot with stdout and stderr closed revokes its key and exits 1', async () => {
  const { child } = reexecutedFirstBoot('>&- 2>&-')
  expect(await child.exited).toBe(1)
  expect(await keyStatuses()).toEqual(['revoked'])
}, 30_000)
