/**
 * Reads what is left of an upstream body whose protocol already ended (`[DONE]`,
 * `message_stop`): its last bytes, the chunked terminator. Read to its end, the keep-alive
 * connection goes back to fetch's pool; aborting it would tear the connection down, and the next
 * call would pay a new TCP (and TLS) handshake. `readEnded` reads one chunk (under the caller's
 * idle deadline) and tells whether the body ended. More than a few chunks is not a tail: it
 * throws, and the caller aborts.
 */
export async function drainRest(readEnded: () => Promise<boolean>): Promise<void> {
  for (let chunks = 0; chunks < 16; chunks += 1) if (await readEnded()) return
  throw new Error('the upstream kept sending after the end of its stream')
}
