import { describe, expect, test } from 'bun:test'
import { KEYS, keysApi } from '../support/api-keys'
import { eachTestWithOrg, type TestApp, type TestOrg } from '../support/harness'

// Key creation bodies over the route's 16 KiB limit (spec §7): declared, chunked, endless and
// over a real socket, each a 413 with nothing written.

let t: TestApp
let org: TestOrg
eachTestWithOrg((app, created) => void ([t, org] = [app, created]))
const { create, list, expectApiError, expectCreateRejected } = keysApi(() => ({ t, org }))

describe('hostile input', () => {

  describe('body over the 16 KiB route limit', () => {
    /** A valid create body padded with JSON whitespace to exactly `size` bytes. */
    const padded = (size: number, name = 'padded') => {
      const base = JSON.stringify({ name })
      return `${base.slice(0, -1)}${' '.repeat(size - base.length)}}`
    }
    const chunked = (text: string, chunkSize = 1000) => {
      const bytes = new TextEncoder().encode(text)
      return new ReadableStream<Uint8Array>({
        start(controller) {
          for (let offset = 0; offset < bytes.length; offset += chunkSize) controller.enqueue(bytes.slice(offset, offset + chunkSize))
          controller.close()
        },
      })
    }
    const sendStream = (body: ReadableStream<Uint8Array>) => {
      const request = new Request(`http://localhost${KEYS}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${org.adminKey}`, 'content-type': 'application/json' },
        body,
        duplex: 'half',
      } as RequestInit)
      expect(request.headers.get('content-length')).toBeNull()
      return t.app.handle(request)
    }

    // An in-process Request built from a string has no content-length header; set it as a client would.
    const sized = (text: string) => create(text, org.adminKey, { 'content-length': String(new TextEncoder().encode(text).length) })

    test('with content-length: exactly 16384 bytes is accepted, 16385 is 413', async () => {
      expect(new TextEncoder().encode(padded(16384)).length).toBe(16384)
      expect((await sized(padded(16384))).status).toBe(201)
      const error = await expectCreateRejected(() => sized(padded(16385)), 413, 'payload_too_large')
      expect(error.message).toContain('16384')
      await expectCreateRejected(() => sized(padded(1 << 20)), 413, 'payload_too_large')
    })

    test('a declared content-length over the limit is refused without reading the body', async () => {
      await expectCreateRejected(() => create('{"name":"small"}', org.adminKey, { 'content-length': '16385' }), 413, 'payload_too_large')
    })

    test('the limit counts bytes, not characters', async () => {
      // 5500 three-byte characters: about a third of 16 KiB in characters, 16500 bytes on the wire.
      const body = `{"name":"${'名'.repeat(5500)}"}`
      await expectCreateRejected(() => sized(body), 413, 'payload_too_large')
      await expectCreateRejected(() => sendStream(chunked(body)), 413, 'payload_too_large')
    })

    test('chunked (no content-length): exactly 16384 bytes is accepted, one more is 413', async () => {
      expect((await sendStream(chunked(padded(16384)))).status).toBe(201)
      await expectCreateRejected(() => sendStream(chunked(padded(16385))), 413, 'payload_too_large')
      await expectCreateRejected(() => sendStream(chunked(padded(1 << 20), 64 * 1024)), 413, 'payload_too_large')
    })

    test('an endless chunked body is cut off, not buffered', async () => {
      let pulled = 0
      const endless = new ReadableStream<Uint8Array>({
        pull(controller) {
          pulled++
          controller.enqueue(new Uint8Array(4096).fill(0x20))
        },
      })
      await expectCreateRejected(() => sendStream(endless), 413, 'payload_too_large')
      expect(pulled).toBeLessThan(16)
    })

    test('over a real socket, chunked and with content-length', async () => {
      const server = Bun.serve({ port: 0, fetch: t.app.fetch })
      try {
        const url = `${server.url.origin}${KEYS}`
        const headers = { authorization: `Bearer ${org.adminKey}`, 'content-type': 'application/json' }
        const streamed = await fetch(url, { method: 'POST', headers, body: chunked(padded(1 << 20), 8192), duplex: 'half' } as RequestInit)
        await expectApiError(streamed, 413, 'payload_too_large')
        const sized = await fetch(url, { method: 'POST', headers, body: padded(20_000) })
        await expectApiError(sized, 413, 'payload_too_large')
        const fine = await fetch(url, { method: 'POST', headers, body: chunked(padded(16384), 100), duplex: 'half' } as RequestInit)
        expect(fine.status).toBe(201)
      } finally {
        server.stop(true)
      }
      expect(await list()).toHaveLength(2)
    })
  })
})
