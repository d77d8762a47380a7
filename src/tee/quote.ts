// TDX quote reading (TEE-PROTOCOL.md A1). The gateway and the client library read only the
// fields the binding checks need; nothing here verifies the quote's signature chain.

const HEADER = 48
const V4_BODY = HEADER
// v5 [I]: a 6-byte body descriptor (type u16, size u32) follows the header.
const V5_BODY = HEADER + 6
const TD_ATTRIBUTES = 120
const MR_CONFIG_ID = 184
const REPORT_DATA = 520
const BODY_SIZE = 584

/** The smallest usable v4 quote: header + TD10 body (ends with report_data at 568..632). */
export const MIN_QUOTE_BYTES = HEADER + BODY_SIZE

export interface QuoteView {
  readonly version: number
  readonly teeType: number
  readonly reportData: Uint8Array
  readonly mrConfigId: Uint8Array
  /** td_attributes bit 0: a debug TD, which no production policy accepts. */
  readonly debug: boolean
  /** A real Intel QE vendor id is non-zero; the simulator writes zeros. */
  readonly zeroQeVendor: boolean
}

/** Reads a TDX v4/v5 quote, or null when it is too short or not a TDX quote. */
export function readQuote(quote: Uint8Array): QuoteView | null {
  if (quote.length < MIN_QUOTE_BYTES) return null
  const view = new DataView(quote.buffer, quote.byteOffset, quote.byteLength)
  const version = view.getUint16(0, true)
  const teeType = view.getUint32(4, true)
  if ((version !== 4 && version !== 5) || teeType !== 0x81) return null
  const body = version === 4 ? V4_BODY : V5_BODY
  if (quote.length < body + BODY_SIZE) return null
  return {
    version,
    teeType,
    reportData: quote.slice(body + REPORT_DATA, body + REPORT_DATA + 64),
    mrConfigId: quote.slice(body + MR_CONFIG_ID, body + MR_CONFIG_ID + 48),
    debug: (quote[body + TD_ATTRIBUTES]! & 1) === 1,
    zeroQeVendor: quote.subarray(12, 28).every(byte => byte === 0),
  }
}

/** Field offsets inside the TD10 body, for the simulator that writes one. */
export const TD10 = { HEADER, TD_ATTRIBUTES, MRTD: 136, MR_CONFIG_ID, RTMR0: 328, REPORT_DATA, BODY_SIZE } as const
