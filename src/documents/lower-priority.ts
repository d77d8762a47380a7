import { dlopen, FFIType, ptr } from 'bun:ffi'

// The server's event loop must keep answering (GET /v1/models p99 < 5 ms) while every worker
// parses at full speed on every core. On Linux a thread's scheduling policy and nice value are
// its own, and sched_setscheduler(0, …) and setpriority(PRIO_PROCESS, 0, …) apply to the
// calling thread only, so each extraction worker lowers just itself.
//
// SCHED_IDLE first: the kernel preempts an idle-policy thread as soon as any normal thread
// wakes on its core, where a niced one may still finish its time slice first (twenty-sixth
// session, bench/README.md: p99 ~0.9 ms lower than nice 10 under a saturated pool). The cost is
// that a parse gets only the CPU nothing else wants: on a host saturated by other work it waits,
// up to the job's deadline (503 `unavailable`, nothing charged). Where SCHED_IDLE is refused, nice 10.
// A thread started from a worker inherits its policy: JSC's shared JIT and GC helper threads,
// when one happens to start for a worker's work, serve every thread's work at that priority
// until it exits idle (as they did at nice 10).
// Elsewhere, or if libc cannot be opened, this does nothing.
const SCHED_IDLE = 5
const WORKER_NICE = 10

/** Lowers the calling thread's scheduling priority; returns how, or undefined if it could not. */
export function lowerThreadPriority(): 'idle' | 'nice' | undefined {
  if (process.platform !== 'linux') return undefined
  try {
    const libc = dlopen('libc.so.6', {
      sched_setscheduler: { args: [FFIType.i32, FFIType.i32, FFIType.ptr], returns: FFIType.i32 },
      setpriority: { args: [FFIType.i32, FFIType.u32, FFIType.i32], returns: FFIType.i32 },
    })
    // struct sched_param { int sched_priority } — 0, the only value SCHED_IDLE takes.
    const param = new Int32Array(1)
    const how = libc.symbols.sched_setscheduler(0, SCHED_IDLE, ptr(param)) === 0 ? 'idle'
      : libc.symbols.setpriority(0, 0, WORKER_NICE) === 0 ? 'nice'
      : undefined
    libc.close()
    return how
  } catch {
    return undefined
  }
}
