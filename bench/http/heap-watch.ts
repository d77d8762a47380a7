/**
 * A preload for the gateway under benchmark: prints its memory once a second to stderr, and every
 * fourth second after a full garbage collection, so a leak (live objects that survive full
 * collections and grow with the requests served) is told apart from garbage not yet collected.
 *
 *   BENCH_GATEWAY_FLAGS="--preload ./bench/http/heap-watch.ts" bun bench/http.ts --only stream-instant --conns 128
 *
 * Each line: RSS, JS heap size and capacity, extra (native memory owned by JS objects) in MiB, the
 * live object count, and the ten most numerous object types.
 */
import { heapStats } from 'bun:jsc'

let tick = 0
setInterval(() => {
  tick += 1
  const collected = tick % 4 === 0
  if (collected) Bun.gc(true)
  const heap = heapStats()
  const memory = process.memoryUsage()
  const top = Object.entries(heap.objectTypeCounts).sort((a, b) => b[1] - a[1]).slice(0, 10).map(([type, count]) => `${type}:${count}`).join(' ')
  const mib = (bytes: number) => Math.round(bytes / 1048576)
  console.error(`heap-watch rss ${mib(memory.rss)} heap ${mib(heap.heapSize)} capacity ${mib(heap.heapCapacity)} extra ${mib(heap.extraMemorySize)} objects ${heap.objectCount}${collected ? ' (after full GC)' : ''} | ${top}`)
}, 1000).unref()
