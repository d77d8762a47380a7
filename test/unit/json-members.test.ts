import { expect, test } from 'bun:test'
import fc from 'fast-check'
import { duplicateMember } from '../../src/http/json-members'

// src/http/json-members.ts: the first member name given twice in one object of a JSON text.

test('JSON.stringify output never names a member twice', () => {
  fc.assert(fc.property(fc.jsonValue(), value => duplicateMember(JSON.stringify(value, null, 1)) === undefined))
})

test('a member repeated anywhere in a stringified value is found, by its decoded name', () => {
  fc.assert(
    fc.property(fc.jsonValue(), fc.string(), fc.jsonValue(), fc.boolean(), (inner, name, value, escape) => {
      const encoded = escape ? `"${name.split('').map(c => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}"` : JSON.stringify(name)
      const object = `{${JSON.stringify(name)}:${JSON.stringify(value)},"other":${JSON.stringify(inner)},${encoded}:1}`
      return duplicateMember(`[1,{"x":${object}}]`) === name
    }),
  )
})

test.each([
  ['{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}', undefined],
  ['{"a":"a","b":"a"}', undefined],
  ['["a","a"]', undefined],
  ['{"a":{"b":1,"b":2}}', 'b'],
  ['[{"x":1},{"x":1,"y":[],"x":2}]', 'x'],
  ['{"q\\"":1,"q\\u0022":2}', 'q"'],
  ['{"":1,"":2}', ''],
])('%s → %p', (text, expected) => {
  expect(duplicateMember(text)).toBe(expected)
})
