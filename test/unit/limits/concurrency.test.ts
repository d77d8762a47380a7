import { describe, expect, test } from 'bun:test'
import { ConcurrencyGate } from '../../../src/limits/concurrency'

describe('ConcurrencyGate', () => {
  test('acquires up to the limit, then refuses', () => {
    const gate = new ConcurrencyGate(3)
    const releases = [gate.tryAcquire('o'), gate.tryAcquire('o'), gate.tryAcquire('o')]
    expect(releases.every(release => typeof release === 'function')).toBe(true)
    expect(gate.inUse('o')).toBe(3)
    expect(gate.tryAcquire('o')).toBeNull()
    expect(gate.inUse('o')).toBe(3)
    releases[0]!()
    expect(gate.tryAcquire('o')).not.toBeNull()
    expect(gate.limit).toBe(3)
  })

  test('release is idempotent: a second call releases nothing', () => {
    const gate = new ConcurrencyGate(2)
    const first = gate.tryAcquire('o')!
    gate.tryAcquire('o')
    first()
    first()
    first()
    expect(gate.inUse('o')).toBe(1)
    expect(gate.tryAcquire('o')).not.toBeNull()
    expect(gate.tryAcquire('o')).toBeNull()
  })

  test('organizations are independent', () => {
    const gate = new ConcurrencyGate(1)
    expect(gate.tryAcquire('a')).not.toBeNull()
    expect(gate.tryAcquire('a')).toBeNull()
    expect(gate.tryAcquire('b')).not.toBeNull()
    expect(gate.inUse('c')).toBe(0)
  })

  test('an organization with nothing in flight leaves no entry behind', () => {
    const gate = new ConcurrencyGate(4)
    for (let i = 0; i < 1000; i++) {
      const releases = [gate.tryAcquire(`org:${i}`)!, gate.tryAcquire(`org:${i}`)!]
      for (const release of releases) {
        release()
        release()
      }
    }
    expect(gate.size).toBe(0)
    expect(gate.inUse('org:1')).toBe(0)
  })

  test('a stale release after the entry was cleaned up does not go negative or free someone else’s slot', () => {
    const gate = new ConcurrencyGate(1)
    const old = gate.tryAcquire('o')!
    old()
    const current = gate.tryAcquire('o')!
    old()
    expect(gate.inUse('o')).toBe(1)
    expect(gate.tryAcquire('o')).toBeNull()
    current()
    expect(gate.size).toBe(0)
  })

  test('rejects a nonsensical limit', () => {
    for (const limit of [0, -1, 1.5]) expect(() => new ConcurrencyGate(limit)).toThrow(RangeError)
  })
})
