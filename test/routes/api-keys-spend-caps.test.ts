import { describe, expect, test } from 'bun:test'
import { keysApi } from '../support/api-keys'
import { eachTestWithOrg, type TestApp, type TestOrg } from '../support/harness'

// Key spend caps through HTTP (spec §4.1, §4.2): the period and the nanos, together and exact.

let t: TestApp
let org: TestOrg
eachTestWithOrg((app, created) => void ([t, org] = [app, created]))
const { createOk, listed, createRejected } = keysApi(() => ({ t, org }))

describe('spend caps', () => {
  test.each(['daily', 'monthly', 'overall'])('%s with nanos is stored and listed exactly', async period => {
    const key = await createOk({ name: period, spend_cap_period: period, spend_cap_nanos: '1000000000' })
    expect(key.spend_cap_period).toBe(period)
    expect(key.spend_cap_nanos).toBe('1000000000')
    const entry = await listed(key.id)
    expect(entry!.spend_cap_period).toBe(period)
    expect(entry!.spend_cap_nanos).toBe('1000000000')
  })

  test.each(['1', '9007199254740993', '9223372036854775807'])('%p nanos round-trips without float loss', async nanos => {
    const key = await createOk({ name: 'cap', spend_cap_period: 'overall', spend_cap_nanos: nanos })
    expect(key.spend_cap_nanos).toBe(nanos)
    expect((await listed(key.id))!.spend_cap_nanos).toBe(nanos)
  })

  test('period without nanos → 400 naming spend_cap_nanos; nanos without period → 400 naming spend_cap_period', async () => {
    const onlyPeriod = await createRejected({ name: 'x', spend_cap_period: 'daily' }, 'spend_cap_nanos')
    expect(onlyPeriod.message).toContain('together')
    const onlyNanos = await createRejected({ name: 'x', spend_cap_nanos: '100' }, 'spend_cap_period')
    expect(onlyNanos.message).toContain('together')
  })

  test.each([
    ['0'],
    ['-1'],
    ['1.5'],
    ['1e9'],
    [' 12'],
    ['12 '],
    ['012'],
    ['+5'],
    ['0x10'],
    [''],
    ['abc'],
    ['1,000'],
    ['١٢'],
    ['9223372036854775808'], // int64 max + 1
    ['99999999999999999999'],
    [1000000000],
    [0],
    [null],
    [true],
  ])('spend_cap_nanos %p → 400 naming spend_cap_nanos', async nanos => {
    const error = await createRejected({ name: 'x', spend_cap_period: 'daily', spend_cap_nanos: nanos }, 'spend_cap_nanos')
    expect(error.message).toContain('spend_cap_nanos')
  })

  test.each(['weekly', 'Daily', 'DAILY', 'yearly', '', 'day', 7, null])('spend_cap_period %p → 400 naming spend_cap_period', async period => {
    await createRejected({ name: 'x', spend_cap_period: period, spend_cap_nanos: '100' }, 'spend_cap_period')
  })
})
