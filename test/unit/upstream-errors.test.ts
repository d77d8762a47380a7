import { describe, expect, test } from 'bun:test'
import { ApiError } from '../../src/http/errors'
import { toApiError, withoutAddresses } from '../../src/inference/upstream-errors'
import { UpstreamError } from '../../src/providers/types'

describe('what a client is shown of an upstream refusal', () => {
  test('the addresses an upstream message names are taken out, wherever they stand', () => {
    expect(withoutAddresses('failed at http://vllm-a:8000/v1/chat/completions, retry')).toBe('failed at [url], retry')
    expect(withoutAddresses('via 10.0.3.7:8000 and 192.168.1.20')).toBe('via [host] and [host]')
    expect(withoutAddresses('node [fd00::17]:8000 or [::1]')).toBe('node [host] or [host]')
    // Without brackets too (before, shown as they were), a zone id or an IPv4 tail included.
    expect(withoutAddresses('connect to 2001:db8::5 failed; upstream ::1 refused')).toBe('connect to [host] failed; upstream [host] refused')
    expect(withoutAddresses('via fe80::1%eth0, 2001:db8:0:0:0:0:0:7 and ::ffff:10.0.0.1.')).toBe('via [host], [host] and [host].')
    expect(withoutAddresses('backend vllm-b:8000 is full')).toBe('backend [host] is full')
    // A single-label host (a compose service name) as a URL host or host:port, also before a
    // colon as Go's net errors put it (before, "inference:8000:" was shown as it was).
    expect(withoutAddresses('Post "http://inference:8000/v1/chat/completions": EOF')).toBe('Post "[url]": EOF')
    expect(withoutAddresses('dial tcp inference:8000: connect: connection refused')).toBe('dial tcp [host]: connect: connection refused')
    expect(withoutAddresses('proxy error: inference:8000: i/o timeout; vllm-b.svc:8000:refused')).toBe('proxy error: [host]: i/o timeout; [host]:refused')
    expect(withoutAddresses('upstream=inference:8000, (inference:8000) inference:8000/v1')).toBe('upstream=[host], ([host]) [host]/v1')
    expect(withoutAddresses('gpu-3.cluster.local, api.corp, db.internal and localhost')).toBe('[host], [host], [host] and [host]')
    // QA: the labels after a local-use one stayed (the organization's domain), and a URL quoted
    // percent-encoded was shown as it was.
    expect(withoutAddresses('proxy //gw-proxy.corp.example.com/v1 refused; gw.lan.acme.io: down.')).toBe('proxy //[host]/v1 refused; [host]: down.')
    expect(withoutAddresses('redirect_uri=http%3A%2F%2F10.0.0.1%3A8000%2Fv1 refused')).toBe('redirect_uri=[url] refused')
    // Review: encoded twice, a host name, an underscore in a label; other percent signs are kept.
    expect(withoutAddresses('next=https%253A%252F%252Fgw.example.com%253A8000%252Fv1, dial gw.corp.acme_internal.com; 100%2f200 done')).toBe('next=[url], dial [host]; 100%2f200 done')
    // Regression QA: half encoded, as Python's quote() writes it, or the other way round.
    expect(withoutAddresses('fetch failed: https%3A//gpu7.acme-private.net/v1/blob?id=3 returned 404; https:%2F%2Fevil.example/a, https%3A/%2Fevil.example:8080/a')).toBe('fetch failed: [url] returned 404; [url], [url]')
  })

  test('what is not an address is kept: numbers, model tags, fields, times', () => {
    for (const message of [
      "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (1000 in the messages, 4000 in the completion).",
      "Invalid 'messages[0].content': expected a string, got null.",
      'model llama3.1:70b not found; try qwen2.5:14b',
      'max_tokens: 5000 is above 4096',
      'temperature must be at most 2.0, got 2.5',
      'quota resets at 2026-11-26T10:30:00Z',
      'retry after T10:30:00 or at 10:30:15: inference is busy',
      'device aa:bb:cc:dd:ee:ff at 10:30:00, std::vector and Foo::bar() failed',
      'the inference server is overloaded: retry',
      'messages.1.content.0.text: field required',
    ]) {
      expect(withoutAddresses(message)).toBe(message)
    }
  })

  test("a 400's message is shown without addresses; a body that is no error object is not shown at all", () => {
    const refused = (details: UpstreamError['details']) => toApiError(new UpstreamError('bad-request', 'upstream answered 400', 'openai-compatible:a', 'm', details))
    const shown = refused({ status: 400, bodySnippet: '{"error":{"message":"too long for vllm-a:8000"}}', upstreamMessage: 'too long for vllm-a:8000' })
    expect(shown).toMatchObject({ code: 'invalid_request', message: 'the upstream provider rejected the request: too long for [host]' })
    const dial = refused({ status: 400, upstreamMessage: 'dial tcp inference:8000: connect: connection refused' })
    expect(dial.message).toBe('the upstream provider rejected the request: dial tcp [host]: connect: connection refused')
    expect(refused({ status: 413, bodySnippet: '<html>nginx at 10.0.0.2</html>' }).message).toBe('the upstream provider rejected the request (HTTP 413)')
    expect(refused({ status: 400, bodySnippet: '' }).message).toBe('the upstream provider rejected the request (HTTP 400)')
    // The adapter's own refusal (nothing was sent) says why.
    expect(toApiError(new UpstreamError('bad-request', 'the backend cannot take audio parts', 'openai-compatible:a', 'm')).message).toBe('the backend cannot take audio parts')
    expect(toApiError(new UpstreamError('bad-request', 'x', 'p', 'm'))).toBeInstanceOf(ApiError)
  })
})

describe("an upstream's Retry-After, passed on", () => {
  const retryAfter = (retryAfterMs: number | undefined) => toApiError(new UpstreamError('rate-limited', 'x', 'p', 'm', { status: 429, retryAfterMs })).headers?.['retry-after']

  test('a wait too long to write as delta-seconds (an absurd number or date) is capped at a day, never "Infinity" or "1e+23"', () => {
    expect(retryAfter(Infinity)).toBe('86400')
    expect(retryAfter(1e26)).toBe('86400')
    expect(retryAfter(251_606_573_842_200)).toBe('86400')
    expect(retryAfter(3_600_000)).toBe('3600')
  })
})
