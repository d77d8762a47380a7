import { expect, test } from 'bun:test'
import { withoutSecret } from '../../src/providers/secret-text'

// The provider key scrubbed from an upstream's error text as written and as JSON may escape it.

test('the key as written, with JSON escapes of any of its characters, and decoded', () => {
  const key = 'sk-prj/AbCd+EfGh/12"34\\xyz'
  const json = JSON.stringify({ message: `bad key ${key}` })
  for (const text of [
    `bad key ${key}`,
    json,
    json.replaceAll('/', '\\/'),
    json.replace('sk', '\\u0073\\u006B'),
    json.replace('AbCd', '\\u0041b\\u0043d'),
  ]) {
    expect(withoutSecret(text, key)).not.toContain('AbCd')
    expect(withoutSecret(JSON.parse(text.startsWith('{') ? text : JSON.stringify(text)).message ?? text, key)).not.toContain('AbCd')
  }
  expect(withoutSecret(json.replaceAll('/', '\\/'), key)).toBe('{"message":"bad key [redacted]"}')
  // Nothing else is touched, and no key means nothing to scrub.
  expect(withoutSecret('sk-prj/AbCd+EfGh', key)).toBe('sk-prj/AbCd+EfGh')
  expect(withoutSecret('anything', undefined)).toBe('anything')
  expect(withoutSecret('x🔑y \\ud83d\\udd11', '🔑')).toBe('x[redacted]y [redacted]')
})
