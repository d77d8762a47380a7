import { describe, expect, test } from 'bun:test'
import { threadScheduling } from './thread-scheduling'

// Extraction workers lower their own thread only (src/documents/lower-priority.ts): SCHED_IDLE,
// so the kernel hands the core to the event loop the moment it wakes; the server's thread keeps
// its normal policy.

describe.if(process.platform === 'linux')('extraction worker priority', () => {
  test('a worker thread that lowers itself runs at SCHED_IDLE; the thread that started it does not', async () => {
    const before = threadScheduling()
    const worker = new Worker(new URL('./priority.worker.ts', import.meta.url).href)
    const report = await new Promise<{ how: string; policy: number; nice: number }>((resolve, reject) => {
      worker.addEventListener('message', event => resolve(event.data))
      worker.addEventListener('error', event => reject(new Error(event.message)))
    })
    worker.terminate()
    expect(report).toMatchObject({ how: 'idle', policy: 5 })
    expect(threadScheduling()).toEqual(before)
    expect(before.policy).toBe(0)
  })
})
