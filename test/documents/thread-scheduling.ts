import { readFileSync } from 'node:fs'

/** The calling thread's scheduling policy (0: SCHED_OTHER) and nice value, from /proc (proc(5): fields 41 and 19). */
export function threadScheduling(): { policy: number; nice: number } {
  const stat = readFileSync('/proc/thread-self/stat', 'utf8')
  // Fields after "pid (comm) " start at field 3.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return { policy: Number(fields[41 - 3]), nice: Number(fields[19 - 3]) }
}
