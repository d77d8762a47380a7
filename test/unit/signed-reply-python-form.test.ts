import { expect, test } from 'bun:test'
import { sha256 } from '@noble/hashes/sha2.js'
import { pythonJsonDump } from '../../src/client/python-json'
import { signedReply, type Attestation } from '../../src/client/tee'
import { bytesToHex, generateKeyPair, signingIdentity } from '../../src/tee/keys'
import { signText } from '../../src/tee/signature'

// Phala's proxy signs the hash of Python's json.dumps of a non-streamed reply while it sends the
// compact JSON (TEE-PROTOCOL.md A3, read from its code). signedReply takes that form of the very
// reply bytes, and still refuses other bytes under the same signature.

// Python 3.11: compact = json.dumps(v, ensure_ascii=False, separators=(",", ":")); dump = json.dumps(v).
const COMPACT = '{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"04abé😀\u007f/\\\\\\"\\n\\t\\u0001"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":5},"x":[1,2.5,-0.001,null,true,false,[],{}]}'
const DUMP = '{"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "04ab\\u00e9\\ud83d\\ude00\\u007f/\\\\\\"\\n\\t\\u0001"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 5}, "x": [1, 2.5, -0.001, null, true, false, [], {}]}'

test("pythonJsonDump writes Python's json.dumps of a compact text", () => {
  expect(pythonJsonDump(COMPACT)).toBe(DUMP)
})

// QA (regression pass): a reply a relay cut inside a string, or after a backslash, looped forever.
test.each(['{"a":"unterminated', '{"a":"ends in \\'])('a text cut inside a string ends: %s', text => {
  expect(pythonJsonDump(text)).toBe(text)
})

const hex = (text: string | Uint8Array) => bytesToHex(sha256(typeof text === 'string' ? new TextEncoder().encode(text) : text))

for (const algo of ['ed25519', 'ecdsa'] as const) {
  test(`${algo}: a signature over the Python form of the reply's bytes verifies; other bytes under it do not`, () => {
    const pair = generateKeyPair(algo)
    const { address } = signingIdentity(pair)
    const request = new TextEncoder().encode('{"model":"m"}')
    const text = `${hex(request)}:${hex(DUMP)}`
    const evidence = (raw: string) => ({
      evidence_available: true, signing_algo: algo, signing_address: address, text, signature: signText(algo, text, pair.secretKey),
      raw_body_b64: Buffer.from(raw).toString('base64'),
    })
    const attestation = { signing_algo: algo, signing_address: address } as Attestation
    expect(signedReply({ svc_response_evidence: evidence(COMPACT) }, request, attestation)).toEqual(JSON.parse(COMPACT))
    const forged = COMPACT.replace('04ab', '04ac')
    expect(() => signedReply({ svc_response_evidence: evidence(forged) }, request, attestation)).toThrow('the signed response hash is not that of the reply bytes')
  })
}
