import { describe, expect, test } from 'bun:test'
import { readCapped, readCappedBytes } from '../../src/http/body-limit'

// The capped body reader behind document uploads, MCP and OAuth forms (src/http/body-limit.ts).
// A declared Content-Length is checked, then the body is read whole; only a body without one is
// counted through its stream reader. Bun's reader is the slow path: reading uploads through it
// made the event loop collect ~20× as often (bench/README.md, twenty-sixth session).

const bytes = (text: string) => new TextEncoder().encode(text)

/** A request whose body stream refuses to hand out a reader: reading it whole must not need one. */
function withoutReader(body: Uint8Array, headers: Record<string, string>): Request {
  const request = new Request('http://localhost/', { method: 'POST', body, headers })
  const stream = request.body!
  stream.getReader = (() => {
    throw new Error('the body was read through its stream reader')
  }) as typeof stream.getReader
  return request
}

function chunked(parts: Array<string | Uint8Array>): Request {
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const part of parts) controller.enqueue(typeof part === 'string' ? bytes(part) : part)
      controller.close()
    },
  })
  return new Request('http://localhost/', { method: 'POST', body: stream })
}

describe('readCappedBytes', () => {
  test('a declared body within the cap is read whole, not through the stream reader', async () => {
    const body = bytes('héllo, world')
    const request = withoutReader(body, { 'content-length': String(body.byteLength) })
    expect(request.body!.getReader).toThrow()
    expect(await readCappedBytes(request, body.byteLength)).toEqual(body)
  })

  test('a declared body past the cap is 413 before any byte is read', async () => {
    const request = withoutReader(bytes('0123456789'), { 'content-length': '10' })
    const refused = await readCappedBytes(request, 9).catch((error: unknown) => error)
    expect(refused).toMatchObject({ code: 'payload_too_large', message: 'request body exceeds 9 bytes' })
    expect(request.bodyUsed).toBe(false)
  })

  test('a body without Content-Length is counted as it streams: whole within the cap, 413 past it', async () => {
    expect(new TextDecoder().decode(await readCappedBytes(chunked(['ab', 'cd', 'ef']), 6))).toBe('abcdef')
    const refused = await readCappedBytes(chunked(['ab', 'cd', 'ef']), 5).catch((error: unknown) => error)
    expect(refused).toMatchObject({ code: 'payload_too_large' })
  })

  test('no body is empty; readCapped decodes UTF-8 split across chunks', async () => {
    expect(await readCappedBytes(new Request('http://localhost/'), 10)).toEqual(new Uint8Array(0))
    const [first, second] = bytes('é')
    expect(await readCapped(chunked(['h', new Uint8Array([first!]), new Uint8Array([second!]), 'llo']), 100)).toBe('héllo')
  })
})
