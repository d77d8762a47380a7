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
