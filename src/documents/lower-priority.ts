import { dlopen, FFIType } from 'bun:ffi'

// The server's event loop must keep answering (GET /v1/models p99 < 5 ms) while every worker
// parses at full speed on every core. On Linux a thread's nice value is its own, and
// setpriority(PRIO_PROCESS, 0, n) applies to the calling thread only, so each extraction
// worker lowers just itself: the scheduler then hands a core to the event loop whenever it
// has work. Elsewhere, or if libc cannot be opened, this does nothing.
const WORKER_NICE = 10

/** Lowers the calling thread's scheduling priority; returns whether it did. */
export function lowerThreadPriority(): boolean {
  if (process.platform !== 'linux') return false
  try {
    const libc = dlopen('libc.so.6', { setpriority: { args: [FFIType.i32, FFIType.u32, FFIType.i32], returns: FFIType.i32 } })
    const result = libc.symbols.setpriority(0, 0, WORKER_NICE)
    libc.close()
    return result === 0
  } catch {
    return false
  }
}
