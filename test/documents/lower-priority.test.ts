import { describe, expect, test } from 'bun:test'
import { threadScheduling } from './thread-scheduling'

// Extraction workers lower their own thread only (src/documents/lower-priority.ts): nice 19, so
// the scheduler hands a core to the event loop whenever it has work; the thread that started the
// worker keeps its own priority.

describe.if(process.platform === 'linux')('extraction worker priority', () => {
  test('a worker thread that lowers itself runs at nice 19; the thread that started it does not', async () => {
    const before = threadScheduling()
    const worker = new Worker(new URL('./priority.worker.ts', import.meta.url).href)
    const report = await new Promise<{ lowered: boolean; policy: number; nice: number }>((resolve, reject) => {
      worker.addEventListener('message', event => resolve(event.data))
      worker.addEventListener('error', event => reject(new Error(event.message)))
    })
    worker.terminate()
    expect(report).toEqual({ lowered: true, policy: 0, nice: 19 })
    expect(threadScheduling()).toEqual(before)
  })
})
