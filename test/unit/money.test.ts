import { describe, expect, test } from 'bun:test'
import { formatNanos, formatUsd, MAX_NANOS, NANOS_PER_USD, parseNanos, parseUsd } from '../../src/lib/money'

// 2^53 + 1: the first integer a JS number cannot hold. Anything that passes through a float loses it.
const BEYOND_FLOAT = 9007199254740993n
const INT64_MAX = 9223372036854775807n
const INT64_MIN = -9223372036854775808n

test('constants', () => {
  expect(NANOS_PER_USD).toBe(1_000_000_000n)
  expect(MAX_NANOS).toBe(INT64_MAX)
  expect(Number(BEYOND_FLOAT)).toBe(9007199254740992) // the premise of the exactness tests below
})

describe('parseUsd', () => {
  test.each([
    ['0', 0n],
    ['1', 1_000_000_000n],
    ['20', 20_000_000_000n],
    ['0.40', 400_000_000n],
    ['0.4', 400_000_000n],
    ['1.5', 1_500_000_000n],
    ['0.000000001', 1n],
    ['0.000000010', 10n],
    ['0.123456789', 123_456_789n],
    ['12.000000000', 12_000_000_000n],
    ['0.1', 100_000_000n], // 0.1 is not exact as a float; here it must be
    ['0.3', 300_000_000n],
    ['9007199.254740993', BEYOND_FLOAT],
    ['9223372036.854775807', INT64_MAX],
  ])('%s → %p nanos', (text, nanos) => {
    expect(parseUsd(text)).toBe(nanos)
  })

  test('amounts past int64 are refused, at the exact boundary', () => {
    expect(parseUsd('9223372036.854775807')).toBe(MAX_NANOS)
    expect(parseUsd('9223372036.854775808')).toBeNull()
    expect(parseUsd('9223372037')).toBeNull()
    expect(parseUsd('99999999999999999999999999')).toBeNull()
  })

  test.each([
    '',
    '.5',
    '1.',
    '01',
    '00',
    '00.5',
    '-1',
    '-0',
    '+1',
    '1e3',
    '1E-9',
    '0x10',
    ' 1',
    '1 ',
    '1\n',
    '1.0000000001', // 10 decimals: below a nano
    '1,000',
    '1_000',
    '1.2.3',
    'NaN',
    'Infinity',
    '$1',
    '１', // full-width digit
    '١', // Arabic-Indic digit
  ])('rejects %p', text => {
    expect(parseUsd(text)).toBeNull()
  })
})

describe('parseNanos', () => {
  test('exact for values a float cannot hold', () => {
    expect(parseNanos('9007199254740993')).toBe(BEYOND_FLOAT)
    expect(parseNanos('9007199254740993')).not.toBe(9007199254740992n)
    expect(parseNanos('9007199254740992')).toBe(9007199254740992n)
  })

  test('accepts 0 through int64 max', () => {
    expect(parseNanos('0')).toBe(0n)
    expect(parseNanos('1')).toBe(1n)
    expect(parseNanos('1000000000')).toBe(NANOS_PER_USD)
    expect(parseNanos('9223372036854775807')).toBe(INT64_MAX)
  })

  test('refuses int64 max + 1 and anything longer', () => {
    expect(parseNanos('9223372036854775808')).toBeNull()
    expect(parseNanos('9999999999999999999')).toBeNull()
    expect(parseNanos('10000000000000000000')).toBeNull()
    expect(parseNanos('1'.repeat(1000))).toBeNull()
  })

  test.each(['', '00', '01', '-1', '-0', '+1', '1.0', '1.5', '1e9', '1E9', ' 12', '12 ', '12\n', '0x1F', '1_000', 'abc', '٣', '１'])('rejects %p', text => {
    expect(parseNanos(text)).toBeNull()
  })
})

describe('formatNanos', () => {
  test('is the plain decimal integer string, exact', () => {
    expect(formatNanos(0n)).toBe('0')
    expect(formatNanos(1n)).toBe('1')
    expect(formatNanos(BEYOND_FLOAT)).toBe('9007199254740993')
    expect(formatNanos(INT64_MAX)).toBe('9223372036854775807')
    expect(formatNanos(INT64_MIN)).toBe('-9223372036854775808')
    expect(formatNanos(5_000_000_000n)).toBe('5000000000') // never "5e9" or "5.0"
  })

  test('round-trips through parseNanos', () => {
    for (const value of [0n, 1n, 999n, NANOS_PER_USD, BEYOND_FLOAT, INT64_MAX - 1n, INT64_MAX]) {
      expect(parseNanos(formatNanos(value))).toBe(value)
    }
  })
})

describe('formatUsd', () => {
  test.each([
    [0n, '0.000000000'],
    [1n, '0.000000001'],
    [999_999_999n, '0.999999999'],
    [NANOS_PER_USD, '1.000000000'],
    [5_000_000_000n, '5.000000000'],
    [1_500_000_000n, '1.500000000'],
    [BEYOND_FLOAT, '9007199.254740993'],
    [INT64_MAX, '9223372036.854775807'],
    [-1n, '-0.000000001'],
    [-1_500_000_000n, '-1.500000000'],
    [INT64_MIN, '-9223372036.854775808'],
  ])('%p → %s', (nanos, text) => {
    expect(formatUsd(nanos)).toBe(text)
  })

  test('round-trips with parseUsd for non-negative amounts', () => {
    for (const value of [0n, 1n, 10n, 400_000_000n, NANOS_PER_USD, 20n * NANOS_PER_USD, BEYOND_FLOAT, INT64_MAX]) {
      expect(parseUsd(formatUsd(value))).toBe(value)
    }
    for (const text of ['0.40', '20', '0.000000001', '9007199.254740993']) {
      expect(parseUsd(formatUsd(parseUsd(text)!))).toBe(parseUsd(text))
    }
  })
})
