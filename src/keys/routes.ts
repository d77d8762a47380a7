import { Elysia, t } from 'elysia'
import { authMacro } from '../http/auth'
import { KiB } from '../http/body-limit'
import { ApiError } from '../http/errors'
import { authErrors, ErrorResponse } from '../http/openapi-schemas'
import { refuseQuery } from '../http/query'
import type { Clock } from '../lib/clock'
import { idFromInput } from '../lib/ids'
import type { Limits } from '../limits/admission'
import type { BalanceView } from '../billing/balance'
import { parseKeyOptions } from './request'
import { CreateKeyBody, CreateKeyResponse, KeyIdParams, ListKeysResponse } from './schema'
import type { KeyService } from './service'
import { keyView } from './view'

const errors = (options: { billed?: boolean } = {}) => ({ 400: ErrorResponse, ...authErrors(ErrorResponse, options) })

/** Organization key management (spec §4.1–4.3): admin credentials only. */
export function keyRoutes(keys: KeyService, limits: Limits, clock: Clock, balance: (orgId: string) => Promise<BalanceView>) {
  return new Elysia({ prefix: '/api/v1/api-keys', tags: ['API keys'] })
    .use(authMacro(keys, limits))
    .post(
      '',
      async ({ body, principal, set }) => {
        const options = parseKeyOptions(body, clock.now())
        await requireFunding(balance, principal.orgId)
        // The new key belongs to the caller's user and organization; it inherits neither expiry nor cap.
        const { key, secret } = await keys.create({ orgId: principal.orgId, userId: principal.userId, ...options })
        set.status = 201
        set.headers['cache-control'] = 'no-store'
        return { key: { ...keyView(key), token: secret } } as typeof CreateKeyResponse.static
      },
      {
        auth: { mode: 'admin', jsonBody: 16 * KiB },
        body: CreateKeyBody,
        // requireFunding: an organization with nothing left is refused 429 insufficient_quota.
        response: { 201: CreateKeyResponse, ...errors({ billed: true }), 413: ErrorResponse },
        detail: {
          summary: 'Create an API key',
          description: 'Creates an organization key owned by the calling user. The secret is returned once, at `key.token`; only its SHA-256 is stored.',
        },
      },
    )
    .get(
      '',
      async ({ principal, request, set }) => {
        refuseQuery(request)
        set.headers['cache-control'] = 'no-store'
        return { keys: (await keys.list(principal.orgId)).map(keyView) } as typeof ListKeysResponse.static
      },
      {
        auth: 'admin',
        response: { 200: ListKeysResponse, ...errors() },
        detail: { summary: 'List API keys', description: "Every key of the caller's organization, newest first. Never returns secrets or hashes. Takes no query parameters (any is 400)." },
      },
    )
    .delete(
      '/:key_id',
      async ({ params, principal }) => {
        if (!(await keys.revoke(principal.orgId, idFromInput(params.key_id)))) {
          throw new ApiError('not_found', 'no active or expired key with this id in your organization', 'key_id')
        }
        return new Response(null, { status: 204 })
      },
      {
        auth: 'admin',
        params: KeyIdParams,
        response: { 204: t.Void({ description: 'Revoked' }), ...errors(), 404: ErrorResponse },
        detail: {
          summary: 'Revoke an API key',
          description: 'Immediate and permanent. A missing, already revoked or other-organization key is 404.',
        },
      },
    )
}

/** Key creation needs a funded organization (spec §3.1, §4.1): allowance or prepaid left. */
async function requireFunding(balance: (orgId: string) => Promise<BalanceView>, orgId: string): Promise<void> {
  let available: bigint
  try {
    available = (await balance(orgId)).availableNanos
  } catch {
    throw new ApiError('unavailable', 'the ledger is unavailable; try again shortly')
  }
  if (available <= 0n) {
    throw new ApiError('insufficient_quota', 'the organization has no plan allowance or prepaid balance left; add credit before creating keys')
  }
}
