import { dlopen, FFIType } from 'bun:ffi'

// The server's event loop must keep answering (GET /v1/models p99 < 5 ms) while every worker
// parses at full speed on every core. On Linux a thread's nice value is its own, and
// setpriority(PRIO_PROCESS, 0, n) applies to the calling thread only, so each extraction
// worker lowers just itself: the scheduler then hands a core to the event loop whenever it
// has work. Elsewhere, or if libc cannot be opened, this does nothing.
//
// Nice 19, the lowest: under a saturated pool the event loop's p99 was ~1 ms lower than at
// nice 10, about what SCHED_IDLE gave. SCHED_IDLE was not kept: beside three busy processes on
// two cores a 5 ms parse took ~6 s at SCHED_IDLE, ~1 s at nice 19 and ~0.1 s at nice 10, and
// a parse that outlives its deadline fails (bench/README.md, twenty-sixth session). A thread
// started from a worker inherits its nice value: JSC's shared JIT and GC helper threads, when
// one happens to start for a worker's work, run at it until they exit idle.
const WORKER_NICE = 19

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
