/**
 * Crash-test seams (SECURITY-NOTES.md §3 L6 and §6.5): with SVC_FAULT_POINT set to one of these
 * names, the process kills itself with SIGKILL when a request reaches that step, so tests can
 * check what a crash at exactly that moment leaves behind. Unset (always, in production), the
 * pipeline gets no fault function at all and pays nothing.
 */
// in_settle: inside the settlement's write transaction, after its statements, before its COMMIT.
export const FAULT_POINTS = ['after_reserve', 'after_upstream_headers', 'mid_stream', 'before_settle', 'in_settle', 'after_settle_before_final_frame'] as const

export type FaultPoint = (typeof FAULT_POINTS)[number]

/** The function the pipeline calls at each step, or undefined when no fault point is set. */
export function faultAt(point: FaultPoint | undefined): ((reached: FaultPoint) => void) | undefined {
  if (point === undefined) return undefined
  return reached => {
    if (reached === point) process.kill(process.pid, 'SIGKILL')
  }
}
