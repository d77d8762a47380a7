// The proof_format registry (TEE-PROTOCOL.md B1): one versioned name for the quote platform,
// the report_data binding and the E2EE protocol variant. Static per backend in config; the
// gateway checks evidence against it and never derives it from backend output.

export type E2eeFamily = 'nearai' | 'phala'

export interface ProofFormat {
  readonly name: string
  /** `addr`: report_data[0:32] = address padded; `tlsfp`: SHA-256(address ‖ TLS fingerprint). */
  readonly binding: 'addr' | 'tlsfp'
  /** Every format in the registry is a dstack TDX quote plus NVIDIA GPU evidence. */
  readonly gpu: true
  /** The E2EE protocol, absent for Confidential-only formats. */
  readonly e2ee?: { readonly family: E2eeFamily; readonly version: 1 | 2 }
}

const NAME = /^dstack-tdx-nvgpu\.(addr-nonce|tlsfp-nonce)(?:\.e2ee-(nearai|phala))?\.v([12])$/

/** Parses a proof_format name, or null when it is not in the registry. */
export function parseProofFormat(name: string): ProofFormat | null {
  const match = NAME.exec(name)
  if (!match) return null
  const binding = match[1] === 'tlsfp-nonce' ? 'tlsfp' : 'addr'
  const family = match[2] as E2eeFamily | undefined
  const version = Number(match[3]) as 1 | 2
  // Without E2EE there is one version of the binding.
  if (family === undefined) return version === 1 ? Object.freeze({ name, binding, gpu: true }) : null
  return Object.freeze({ name, binding, gpu: true, e2ee: Object.freeze({ family, version }) })
}

/** Every registered name (for config messages and docs). */
export const PROOF_FORMATS: readonly string[] = ['addr-nonce', 'tlsfp-nonce'].flatMap(binding => [
  `dstack-tdx-nvgpu.${binding}.v1`,
  ...['nearai', 'phala'].flatMap(family => [1, 2].map(version => `dstack-tdx-nvgpu.${binding}.e2ee-${family}.v${version}`)),
])
