import { and, eq } from 'drizzle-orm'
import type { OAuthConfig } from '../config/config'
import type { Db } from '../db/client'
import { oauthDeviceCodes, type OAuthScope } from '../db/schema'
import type { Clock } from '../lib/clock'
import type { OAuthClient } from './clients'
import { OAuthError } from './errors'
import { checkAudience, type NamedResource } from './resource'
import { hashOf, randomSecret } from './secrets'
import type { TokenService, TokenSet } from './tokens'

// RFC 8628 §6.1: consonants only (no vowels: no words; no look-alikes), 8 of them ≈ 34 bits.
const USER_CODE_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ'
const USER_CODE_LENGTH = 8
// RFC 8628 §3.5: each slow_down adds 5 seconds to the interval.
const SLOW_DOWN_STEP_S = 5

/** `ABCD-EFGH` for display; stored without the dash. */
export function formatUserCode(code: string): string {
  return `${code.slice(0, 4)}-${code.slice(4)}`
}

/** What a person types: case, spaces and dashes do not matter (RFC 8628 §6.1). */
export function normalizeUserCode(input: string): string {
  return input.toUpperCase().replace(/[^A-Z]/g, '')
}

function newUserCode(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(USER_CODE_LENGTH))
  // 256 is not a multiple of 20: the bias (≤ 1 in 12) costs well under a bit of the 34.
  return Array.from(bytes, byte => USER_CODE_ALPHABET[byte % USER_CODE_ALPHABET.length]).join('')
}

export interface PendingDevice {
  userCode: string
  clientId: string
  scope: OAuthScope
}

/** The device authorization grant (RFC 8628) for command-line clients. */
export class DeviceService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly tokens: TokenService,
    private readonly config: OAuthConfig,
  ) {}

  async start(client: OAuthClient, scope: OAuthScope, verificationUri: string): Promise<Record<string, unknown>> {
    const deviceCode = randomSecret()
    const userCode = newUserCode()
    const now = this.clock.now()
    await this.db.insert(oauthDeviceCodes).values({
      hash: hashOf(deviceCode), userCode, clientId: client.id, scope, status: 'pending',
      intervalS: this.config.devicePollIntervalS, createdAtMs: now, expiresAtMs: now + this.config.deviceCodeTtlMs,
    })
    return {
      device_code: deviceCode,
      user_code: formatUserCode(userCode),
      verification_uri: verificationUri,
      verification_uri_complete: `${verificationUri}?user_code=${formatUserCode(userCode)}`,
      expires_in: Math.floor(this.config.deviceCodeTtlMs / 1000),
      interval: this.config.devicePollIntervalS,
    }
  }

  /** A pending, unexpired request by the code the person typed, or undefined. */
  async pending(userCodeInput: string): Promise<PendingDevice | undefined> {
    const userCode = normalizeUserCode(userCodeInput)
    if (userCode.length !== USER_CODE_LENGTH) return undefined
    const rows = await this.db.select().from(oauthDeviceCodes).where(eq(oauthDeviceCodes.userCode, userCode)).limit(1)
    const row = rows[0]
    if (!row || row.status !== 'pending' || row.expiresAtMs <= this.clock.now()) return undefined
    return { userCode, clientId: row.clientId, scope: row.scope }
  }

  /**
   * The person's decision on the device page, with the API key they signed in with (its id),
   * which will bound the tokens. False when the code is no longer pending.
   */
  async decide(userCode: string, decision: { approve: true; userId: string; orgId: string; keyId: string } | { approve: false }): Promise<boolean> {
    const result = await this.db
      .update(oauthDeviceCodes)
      .set(decision.approve ? { status: 'approved', userId: decision.userId, orgId: decision.orgId, keyId: decision.keyId } : { status: 'denied' })
      .where(and(eq(oauthDeviceCodes.userCode, userCode), eq(oauthDeviceCodes.status, 'pending')))
    return result.rowsAffected === 1
  }

  /** The token endpoint's device_code grant (RFC 8628 §3.4, §3.5). */
  async poll(deviceCode: string, clientId: string, resource: NamedResource | undefined): Promise<TokenSet> {
    const hash = hashOf(deviceCode)
    const rows = await this.db.select().from(oauthDeviceCodes).where(eq(oauthDeviceCodes.hash, hash)).limit(1)
    const row = rows[0]
    if (!row || row.clientId !== clientId) throw new OAuthError('invalid_grant', 'the device code is invalid')
    // Before any state changes: a poll naming the wrong resource spends nothing.
    checkAudience(resource, row.scope)
    const now = this.clock.now()
    if (row.status === 'used') throw new OAuthError('invalid_grant', 'the device code was already used')
    if (row.expiresAtMs <= now) throw new OAuthError('expired_token', 'the device code has expired; start again')
    if (row.status === 'denied') throw new OAuthError('access_denied', 'the request was denied')
    if (row.status === 'pending') {
      const tooSoon = row.lastPolledAtMs !== null && now - row.lastPolledAtMs < row.intervalS * 1000
      await this.db
        .update(oauthDeviceCodes)
        .set({ lastPolledAtMs: now, intervalS: tooSoon ? row.intervalS + SLOW_DOWN_STEP_S : row.intervalS })
        .where(eq(oauthDeviceCodes.hash, hash))
      if (tooSoon) throw new OAuthError('slow_down', `polling too fast: wait ${row.intervalS + SLOW_DOWN_STEP_S} seconds between requests`)
      throw new OAuthError('authorization_pending', 'the user has not approved the request yet')
    }
    // Approved: spend it (guarded) and issue.
    const spent = await this.db
      .update(oauthDeviceCodes)
      .set({ status: 'used' })
      .where(and(eq(oauthDeviceCodes.hash, hash), eq(oauthDeviceCodes.status, 'approved')))
    if (spent.rowsAffected !== 1 || !row.userId || !row.orgId) throw new OAuthError('invalid_grant', 'the device code was already used')
    // Approved before key-bound sign-in (migration 0006): no key to bound the tokens.
    if (!row.keyId) throw new OAuthError('invalid_grant', 'the approval names no API key; start again')
    const { tokens } = await this.tokens.issue({ clientId, userId: row.userId, orgId: row.orgId, scope: row.scope, resource: resource?.url ?? null, keyId: row.keyId })
    return tokens
  }
}
