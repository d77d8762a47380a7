// How much RAM JavaScriptCore is told the host has, for `svc serve` (README.md, "Memory").
// Kept to node:fs and node:os (std-output.ts is too): src/cli.ts decides this before the gateway's
// modules load.
import { readFileSync } from 'node:fs'
import { totalmem } from 'node:os'
import { closedAtStartEnv } from './std-output'

/** JSC's option, read once when the process starts. */
export const HEAP_RAM_VARIABLE = 'BUN_JSC_forceRAMSize'

/**
 * The most RAM a server's heap is sized for. JSC grows its heap between collections in
 * proportion to the RAM it detects, and from 16 GiB up it lets it swing much further: on a
 * 24 GiB host the peak RSS at 128 connections was 170–290 MiB against 125–135 MiB when told
 * 8 GiB, for ~3% more CPU per request (bench/README.md, "JavaScriptCore's heap sized for a server").
 */
export const HEAP_RAM_CAP = 8 * 1024 ** 3

// A container's memory limit, or a systemd unit's (MemoryMax=), which JSC does not see (it reads
// the host's RAM): cgroup v2's unified hierarchy and v1's memory controller, each mounted here.
const CGROUP_MOUNT = '/sys/fs/cgroup'
const HIERARCHIES = [
  { mount: CGROUP_MOUNT, file: 'memory.max', holds: (id: string, controllers: string) => id === '0' && controllers === '' },
  { mount: `${CGROUP_MOUNT}/memory`, file: 'memory.limit_in_bytes', holds: (_id: string, controllers: string) => controllers.split(',').includes('memory') },
]

/**
 * The memory limit of this process's cgroup, when it has one: the least of those set on its own
 * cgroup and every ancestor up to the root (a limit binds everything below it), in either
 * hierarchy. Its own cgroup is the one /proc/self/cgroup names; inside a container (its own
 * cgroup namespace, or a mount of just its cgroup) the path names nothing and the mount's root is it.
 */
export function cgroupLimit(read: (path: string) => string = path => readFileSync(path, 'utf8')): number | undefined {
  let memberships: Array<[id: string, controllers: string, path: string]> = []
  try {
    // "id:controllers:path" per hierarchy; the path may hold a colon.
    memberships = read('/proc/self/cgroup').split('\n').flatMap(line => {
      const first = line.indexOf(':')
      const second = line.indexOf(':', first + 1)
      return first < 0 || second < 0 ? [] : [[line.slice(0, first), line.slice(first + 1, second), line.slice(second + 1)] as [string, string, string]]
    })
  } catch {
    // Not readable: the mounts' roots, as a container sees its own cgroup.
  }
  let least: number | undefined
  for (const { mount, file, holds } of HIERARCHIES) {
    const own = memberships.find(([id, controllers]) => holds(id, controllers))?.[2] ?? '/'
    const segments = own.split('/').filter(segment => segment !== '' && segment !== '.' && segment !== '..')
    for (let depth = segments.length; depth >= 0; depth--) {
      const limit = limitIn(read, [mount, ...segments.slice(0, depth), file].join('/'))
      if (limit !== undefined && (least === undefined || limit < least)) least = limit
    }
  }
  return least
}

/** The limit a cgroup's file sets: none when it is missing, "max" (v2) or a huge page-rounded number (v1). */
function limitIn(read: (path: string) => string, path: string): number | undefined {
  let text: string
  try {
    text = read(path).trim()
  } catch {
    return undefined
  }
  const bytes = Number(text)
  return Number.isSafeInteger(bytes) && bytes > 0 ? bytes : undefined
}

/**
 * The RAM size to give JSC, or undefined when nothing should change: the operator set the
 * variable (any value, e.g. the host's RAM to opt out), or the host is already no larger.
 */
export function heapRamSize(env: Record<string, string | undefined>, host = totalmem(), limit = cgroupLimit()): number | undefined {
  if (env[HEAP_RAM_VARIABLE] !== undefined && env[HEAP_RAM_VARIABLE] !== '') return undefined
  const size = Math.min(host, limit ?? host, HEAP_RAM_CAP)
  return size < host ? size : undefined
}

/**
 * Re-executes this process (same pid, arguments and Bun flags) with the variable set, when
 * heapRamSize asks for it; returns only when it does not, or when the re-execution failed. The
 * compiled binary is re-run with its own arguments (its argv[1] is the embedded entry's path,
 * which it supplies itself).
 */
export function reexecWithHeapRam(): void {
  const size = heapRamSize(process.env)
  if (size === undefined || typeof process.execve !== 'function') return
  const compiled = import.meta.url.includes('$bunfs')
  const args = compiled ? [process.execPath, ...process.argv.slice(2)] : [process.execPath, ...process.execArgv, ...process.argv.slice(1)]
  try {
    // A closed stdout or stderr is no longer recognisable after exec (std-output.ts): it is told.
    process.execve(process.execPath, args, { ...process.env, [HEAP_RAM_VARIABLE]: String(size), ...closedAtStartEnv() })
  } catch (error) {
    // Serving with JSC's own sizing beats not serving: say so once, and go on.
    console.error(`svc: could not re-execute with ${HEAP_RAM_VARIABLE}=${size} (${(error as Error).message}); the heap keeps JSC's default sizing`)
  }
}
