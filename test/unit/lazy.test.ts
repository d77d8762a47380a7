import { expect, test } from 'bun:test'
import { lazy } from '../../src/lib/lazy'

test('lazy loads once on first call and shares the result, also between concurrent first calls', async () => {
  let loads = 0
  const load = lazy(async () => ({ n: ++loads }))
  expect(loads).toBe(0)
  const [a, b] = await Promise.all([load(), load()])
  expect(a).toBe(b)
  expect(await load()).toBe(a)
  expect(loads).toBe(1)
})

test('a failed load is not kept: the next call tries again', async () => {
  let calls = 0
  const load = lazy(async () => {
    calls += 1
    if (calls === 1) throw new Error('transient')
    return 'ok'
  })
  await expect(load()).rejects.toThrow('transient')
  expect(await load()).toBe('ok')
  expect(await load()).toBe('ok')
  expect(calls).toBe(2)
})
