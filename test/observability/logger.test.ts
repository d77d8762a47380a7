import { expect, spyOn, test } from 'bun:test'
import { createLogger, FLUSH_LINES } from '../../src/observability/logger'

test('JSON lines: bigints as decimal strings (top level and nested), undefined fields left out, credentials redacted, level threshold', () => {
  const lines: string[] = []
  const logger = createLogger('info', line => lines.push(line))
  logger.debug('hidden')
  logger.info('request', { charged_nanos: 12345678901234567890n, nested: { amount: 5n, list: [1n] }, missing: undefined, status: 200, ok: true })
  logger.warn('leak', { error: 'bad key z_sk_abcDEF0123456789 and svc_cli_token_x', stack: 'svc_mcp_zzz' })
  expect(lines).toHaveLength(2)
  for (const line of lines) expect(line.endsWith('\n')).toBe(true)
  const first = JSON.parse(lines[0]!)
  expect(first).toMatchObject({ level: 'info', msg: 'request', charged_nanos: '12345678901234567890', nested: { amount: '5', list: ['1'] }, status: 200, ok: true })
  expect('missing' in first).toBe(false)
  expect(typeof first.time).toBe('string')
  const second = JSON.parse(lines[1]!)
  expect(second.error).toBe('bad key z_sk_[redacted] and svc_cli_[redacted]')
  expect(second.stack).toBe('svc_mcp_[redacted]')
})

test('standard output: lines are written in batches, not one write per line', () => {
  const write = spyOn(process.stdout, 'write').mockImplementation(() => true)
  try {
    const logger = createLogger('info')
    for (let index = 1; index < FLUSH_LINES; index += 1) logger.info('request', { index })
    // Held until the batch's timer (a few ms) or until it is full.
    expect(write).toHaveBeenCalledTimes(0)
    logger.info('request', { index: FLUSH_LINES })
    expect(write).toHaveBeenCalledTimes(1)
    const lines = String(write.mock.calls[0]![0]).trimEnd().split('\n')
    expect(lines).toHaveLength(FLUSH_LINES)
    expect(lines.map(line => JSON.parse(line).index)).toEqual(Array.from({ length: FLUSH_LINES }, (_, index) => index + 1))
  } finally {
    write.mockRestore()
  }
})

test('a message needing escapes, no fields and empty fields each make one valid JSON line', () => {
  const lines: string[] = []
  const logger = createLogger('debug', line => lines.push(line))
  logger.debug('a "quoted"\nmessage \\ with ✓')
  logger.info('empty', {})
  logger.error('fields', { msg_detail: 'x', count: 0 })
  expect(lines.map(line => JSON.parse(line))).toMatchObject([
    { level: 'debug', msg: 'a "quoted"\nmessage \\ with ✓' },
    { level: 'info', msg: 'empty' },
    { level: 'error', msg: 'fields', msg_detail: 'x', count: 0 },
  ])
  expect(Object.keys(JSON.parse(lines[1]!))).toEqual(['time', 'level', 'msg'])
})

test('a credential right after an escape (a stack trace line, a tab) or inside a URL-encoded or glued word is redacted too', () => {
  // The JSON text of "\nz_sk_…" is `\nz_sk_…`: no word boundary before the prefix, so a
  // boundary-anchored pattern let a key at the start of a stack-trace line through.
  const lines: string[] = []
  const logger = createLogger('info', line => lines.push(line))
  const key = 'z_sk_4Fq9Zr0aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789abcdef'
  const cli = 'svc_cli_Zm9vYmFyYmF6cXV4cXV1eA-_0123456789abcdefghijklmn'
  const mcp = 'svc_mcp_Zm9vYmFyYmF6cXV4cXV1eA-_0123456789abcdefghijklmn'
  logger.error('unhandled error', { stack: `Error: refused\n${key}\n    at handler (app.ts:1:1)` })
  logger.warn('tabbed', { detail: `token\t${cli}` })
  logger.warn('encoded', { url: `http://upstream/v1?auth%3D${mcp}` })
  logger.warn('glued', { header: `Bearer_${key}`, nul: `\u0000${cli}` })
  logger.info(`${key}\n${mcp}`)
  const text = lines.join('')
  for (const secret of [key, cli, mcp]) expect(text).not.toContain(secret.slice(8))
  expect(JSON.parse(lines[0]!).stack).toBe('Error: refused\nz_sk_[redacted]\n    at handler (app.ts:1:1)')
  expect(JSON.parse(lines[4]!).msg).toBe('z_sk_[redacted]\nsvc_mcp_[redacted]')
})
