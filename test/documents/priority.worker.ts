// Lowers its own thread (src/documents/lower-priority.ts) and reports the thread's policy and
// nice value as the kernel sees them (/proc/thread-self/stat).
import { lowerThreadPriority } from '../../src/documents/lower-priority'
import { threadScheduling } from './thread-scheduling'

declare const self: Worker

const lowered = lowerThreadPriority()
self.postMessage({ lowered, ...threadScheduling() })
