import { describe, expect, test } from 'bun:test'
import { createLogger, displayUrl, redactCredentials } from '../../src/observability/logger'

function capture(level: 'debug' | 'info' | 'warn' | 'error' = 'info') {
  const lines: string[] = []
  return { lines, logger: createLogger(level, line => lines.push(line)), parsed: () => lines.map(line => JSON.parse(line)) }
}

describe('logger', () => {
  test('one JSON object per line, fields after time, level and msg; undefined fields left out', () => {
    const { lines, logger, parsed } = capture()
    logger.info('chat', { request_id: 'req_1', outcome: 'ok', input_tokens: undefined, stream: false })
    expect(lines).toHaveLength(1)
    expect(lines[0]!.endsWith('}\n')).toBe(true)
    const [record] = parsed()
    expect(Object.keys(record)).toEqual(['time', 'level', 'msg', 'request_id', 'outcome', 'stream'])
    expect(record).toMatchObject({ level: 'info', msg: 'chat', request_id: 'req_1', outcome: 'ok', stream: false })
    expect(new Date(record.time).toISOString()).toBe(record.time)
  })

  test('bigints become decimal strings, at the top level and nested', () => {
    const { logger, parsed } = capture()
    logger.info('charged', { charged_nanos: 123456789012345678901234567890n, nested: { amount: -5n, list: [1n] } })
    expect(parsed()[0]).toMatchObject({ charged_nanos: '123456789012345678901234567890', nested: { amount: '-5', list: ['1'] } })
  })

  test('credentials are cut to their prefix in the message and in every field', () => {
    const { lines, logger } = capture()
    const key = `z_sk_${'A'.repeat(43)}abcdef`
    logger.warn(`bad header Bearer ${key}`, { header: `Bearer ${key}`, nested: { token: 'svc_cli_abc-DEF_123', other: 'svc_mcp_xyz' } })
    expect(lines[0]).not.toContain('A'.repeat(43))
    expect(lines[0]).not.toContain('abc-DEF_123')
    expect(lines[0]).not.toContain('xyz')
    expect(JSON.parse(lines[0]!)).toMatchObject({
      msg: 'bad header Bearer z_sk_[redacted]',
      header: 'Bearer z_sk_[redacted]',
      nested: { token: 'svc_cli_[redacted]', other: 'svc_mcp_[redacted]' },
    })
  })

  test('lines below the level are dropped', () => {
    const { lines, logger } = capture('warn')
    logger.debug('a')
    logger.info('b')
    logger.warn('c')
    logger.error('d')
    expect(lines.map(line => JSON.parse(line).msg)).toEqual(['c', 'd'])
  })
})

test("redactCredentials cuts a URL's query and password, and keeps the text after them", () => {
  expect(redactCredentials('cannot reach the database at libsql://127.0.0.1:1?authToken=eyJ.abc-1_2: ECONNREFUSED')).toBe('cannot reach the database at libsql://127.0.0.1:1?[redacted]: ECONNREFUSED')
  expect(redactCredentials('https://user:pass@host/v1 failed')).toBe('https://[redacted]@host/v1 failed')
  // QA: a password holding '/' (what makes such a URL refused) was printed whole, and any query
  // but authToken= too (SVC_URL's ?token=…); a URL already cut is left as it is.
  expect(redactCredentials('got "libsql://user:db/PW@db.example/x"')).toBe('got "libsql://[redacted]@db.example/x"')
  expect(redactCredentials('cannot reach the gateway at http://[redacted]@127.0.0.1:44299/x?token=QTOK: ECONNREFUSED')).toBe('cannot reach the gateway at http://[redacted]@127.0.0.1:44299/x?[redacted]: ECONNREFUSED')
  expect(redactCredentials('got "https://x/v1#[redacted]", see https://docs.example/a#b.')).toBe('got "https://x/v1#[redacted]", see https://docs.example/a#[redacted].')
  // Regression QA: a "'" ended the cut (a password or query holding one was printed), and an '@'
  // in a path hid the host of a URL without credentials.
  expect(redactCredentials("at http://ops:s3'cret@127.0.0.1:44398: ECONNREFUSED; at http://h:1/?sig=abc'def: ECONNREFUSED")).toBe('at http://[redacted]@127.0.0.1:44398: ECONNREFUSED; at http://h:1/?[redacted]: ECONNREFUSED')
  expect(redactCredentials('at http://127.0.0.1:44398/@team/gw, https://registry.npmjs.org/@scope/pkg and ops@example.com')).toBe('at http://127.0.0.1:44398/@team/gw, https://registry.npmjs.org/@scope/pkg and ops@example.com')
  expect(redactCredentials("said 'see https://h/a?b=c' then")).toBe("said 'see https://h/a?[redacted]' then")
})

test('displayUrl shows a URL an error quotes without its user:password, query or fragment, whatever they hold', () => {
  // Regression QA: a '"' or a space in a password (the URL parser takes both) ended the text cut.
  expect(displayUrl('http://ops:Pa"ss@127.0.0.1:44598/')).toBe('http://[redacted]@127.0.0.1:44598/')
  expect(displayUrl('http://admin:hun ter2@up.example/v1?x="a b"')).toBe('http://[redacted]@up.example/v1?[redacted]')
  expect(displayUrl('libsql://admin:hunter2@')).toBe('libsql://[redacted]@')
  expect(displayUrl('http://[::1]:44598/@team/gw')).toBe('http://[::1]:44598/@team/gw')
  // A file: path's '@' is no user (regression QA: a relative path was shown as an absolute URL).
  expect([displayUrl('file:rel@dir/x.db'), displayUrl('file:/var/lib/svc@prod/svc.db?mode=ro')]).toEqual(['file:rel@dir/x.db', 'file:/var/lib/svc@prod/svc.db?[redacted]'])
  // Without an '@', as written: a refused value stays recognisable.
  expect([displayUrl('ftp://x'), displayUrl('/var/lib/svc.db'), displayUrl('https://h/v1#frag')]).toEqual(['ftp://x', '/var/lib/svc.db', 'https://h/v1#[redacted]'])
})
