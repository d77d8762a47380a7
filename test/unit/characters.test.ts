import { expect, test } from 'bun:test'
import { characterCount, cutText, maxCharactersPattern } from '../../src/lib/characters'

// maxCharactersPattern is a schema limit in characters (code points, as characterCount counts
// them), read the same by TypeBox (no `u` flag) and by Ajv and OpenAPI tools (`u` flag).

const TEXTS = ['', 'k', '🔑', 'é', '\uD800', '\uDC00', '\uD800x', '\uDC00\uD800', 'a🔑b', '🔑\uD83D', '👩‍💻']

test('the pattern admits exactly the strings of at most max characters, with and without the u flag', () => {
  for (const base of TEXTS) {
    for (const repeat of [1, 3, 4, 5]) {
      const text = base.repeat(repeat)
      for (const max of [0, 3, 4, 8]) {
        const fits = characterCount(text) <= max
        for (const flags of ['', 'u']) {
          expect({ text, max, flags, matches: new RegExp(maxCharactersPattern(max), flags).test(text) }).toEqual({ text, max, flags, matches: fits })
        }
      }
    }
  }
  // The metadata limits at their boundaries, in emoji (two UTF-16 units each).
  expect(new RegExp(maxCharactersPattern(64)).test('🔑'.repeat(64))).toBe(true)
  expect(new RegExp(maxCharactersPattern(64)).test('🔑'.repeat(65))).toBe(false)
})

test('a long string fails in linear time (no alternative overlaps another, so nothing backtracks)', () => {
  const pattern = new RegExp(maxCharactersPattern(512))
  const started = performance.now()
  for (const text of ['🔑'.repeat(513), '🔑'.repeat(100_000), `x${'\uD83D'.repeat(100_000)}`, '\uDC00🔑'.repeat(50_000)]) expect(pattern.test(text)).toBe(false)
  expect(performance.now() - started).toBeLessThan(1000)
})

test('cutText cuts at max UTF-16 units, one less where that would split a surrogate pair', () => {
  expect(cutText('abc', 5)).toBe('abc')
  expect(cutText('abc', 2)).toBe('ab')
  expect(cutText('a🔑b', 2)).toBe('a')
  expect(cutText('a🔑b', 3)).toBe('a🔑')
  expect(cutText('🔑', 1)).toBe('')
  expect(cutText('🔑', 0)).toBe('')
  // A lone low surrogate already in the text is not this cut's doing: it is kept as it is.
  expect(cutText('a\uDC00b', 2)).toBe('a\uDC00')
  for (let max = 0; max <= 600; max++) expect(cutText(`a${'😀'.repeat(300)}`, max).isWellFormed()).toBe(true)
})
