// Standard output and error, written so that a failed write is an error: console.log drops one
// without a word (a full disk, a closed pipe or descriptor), which lost API keys shown only once (QA).
import { fstatSync, readFileSync, statSync, writeSync } from 'node:fs'

/** Where a command's lines go: standard output and error, or a test's capture. */
export interface Output {
  /** Throws when the line could not be written. */
  out(line: string): void
  err(line: string): void
  /** Text to standard output as it comes, without a line end (a streamed answer); throws as `out`. */
  write(text: string): void
}

/** Each line to fd 1 or 2, whole, or an error naming which failed. */
export const stdOutput: Output = {
  out: line => writeAll(1, `${line}\n`),
  err: line => writeAll(2, `${line}\n`),
  write: text => writeAll(1, text),
}

const NAMES = { 1: 'standard output', 2: 'standard error' }

/** Writes all of `text` to fd 1 or 2; throws when the descriptor does not take it (or is closed). */
export function writeAll(fd: 1 | 2, text: string): void {
  if (closedAtStart(fd)) throw new Error(`cannot write to ${NAMES[fd]}: it is closed`)
  const bytes = Buffer.from(text)
  let written = 0
  while (written < bytes.length) {
    try {
      written += writeSync(fd, bytes, written)
    } catch (error) {
      // Once process.stdout (or stderr) has been touched, Bun makes its descriptor non-blocking:
      // a full pipe is EAGAIN (or a short write), waited out here as a blocking write would.
      if ((error as NodeJS.ErrnoException).code === 'EAGAIN') Bun.sleepSync(1)
      else throw new Error(`cannot write to ${NAMES[fd]}: ${(error as Error).message}`, { cause: error })
    }
  }
}

// Linux's O_CLOEXEC (node:fs does not export it).
const O_CLOEXEC = 0o2000000
const closed = new Map<number, boolean>()

// A process re-executed by heap-ram.ts inherits the /dev/null Bun opened in place of a closed
// descriptor without its close-on-exec flag, where it looks like an operator's own `> /dev/null`
// (QA: the first boot's key was "printed" there and stayed active). The parent passes what it
// found in this variable ("1,2", "1", "2" or ""); it is read here, as the process starts, and
// removed so that no further child inherits it.
const CLOSED_AT_START_VARIABLE = 'SVC_CLOSED_AT_START'
const inherited = process.env[CLOSED_AT_START_VARIABLE]
if (inherited !== undefined) {
  delete process.env[CLOSED_AT_START_VARIABLE]
  const fds = inherited.split(',')
  for (const fd of [1, 2]) closed.set(fd, fds.includes(String(fd)))
}

/** The environment entry that tells a re-executed copy of this process which of fds 1 and 2 were closed at start. */
export function closedAtStartEnv(): Record<string, string> {
  return { [CLOSED_AT_START_VARIABLE]: [1, 2].filter(closedAtStart).join(',') }
}

/**
 * Whether fd was closed when the process started (`svc … >&-`). Bun then opens /dev/null in its
 * place, where every write "succeeds"; it opens it close-on-exec, which no inherited descriptor
 * can be (exec closed those), so a /dev/null chosen by the operator (`> /dev/null`) is not taken
 * for it. Linux only (/proc); elsewhere a closed descriptor goes undetected.
 */
export function closedAtStart(fd: number): boolean {
  let known = closed.get(fd)
  if (known === undefined) {
    try {
      const flags = /^flags:\s*([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))?.[1]
      known = flags !== undefined && (parseInt(flags, 8) & O_CLOEXEC) !== 0 && fstatSync(fd).rdev === statSync('/dev/null').rdev
    } catch {
      known = false
    }
    closed.set(fd, known)
  }
  return known
}
