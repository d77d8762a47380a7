import { Elysia, t } from 'elysia'
import { authMacro } from '../http/auth'
import { ApiError } from '../http/errors'
import { authErrors, ErrorResponse, noStore } from '../http/openapi-schemas'
import { refuseQuery } from '../http/query'
import type { KeyService } from '../keys/service'
import { formatNanos } from '../lib/money'
import type { Limits } from '../limits/admission'
import type { Logger } from '../observability/logger'
import type { BalanceView } from './balance'

const Nanos = (description: string) => t.String({ pattern: '^-?[0-9]+$', description, examples: ['5000000000'] })

export const BalanceResponse = t.Object({
  available_nanos: Nanos('Available balance: the current month’s plan allowance left plus prepaid, integer USD nanos'),
  top_up_projection_state: t.Union([t.Literal('available'), t.Literal('unavailable')]),
  top_up_remaining_nanos: t.Optional(Nanos('Top-ups not yet spent; omitted when the projection is unavailable')),
  top_up_spent_nanos: t.Optional(Nanos('Known spending attributed to top-ups (not total spend); omitted when unavailable')),
})

/** GET /api/v1/billing/balance (spec §4.4): admin only, management limits, no inference slot, never a fabricated zero. */
export function billingRoutes(keys: KeyService, limits: Limits, balance: (orgId: string) => Promise<BalanceView>, logger: Logger) {
  return new Elysia({ prefix: '/api/v1/billing', tags: ['Billing'] }).use(authMacro(keys, limits)).get(
    '/balance',
    async ({ principal, request, set }) => {
      refuseQuery(request)
      set.headers['cache-control'] = 'no-store'
      let view: BalanceView
      try {
        view = await balance(principal.orgId)
      } catch (error) {
        logger.error('balance read failed', { org_id: principal.orgId, error: String(error) })
        throw new ApiError('unavailable', 'the ledger is unavailable; try again shortly')
      }
      const body: typeof BalanceResponse.static = {
        available_nanos: formatNanos(view.availableNanos),
        top_up_projection_state: view.topUp ? 'available' : 'unavailable',
      }
      if (view.topUp) {
        body.top_up_remaining_nanos = formatNanos(view.topUp.remainingNanos)
        body.top_up_spent_nanos = formatNanos(view.topUp.spentNanos)
      }
      return body
    },
    {
      auth: 'admin',
      response: { 200: noStore(BalanceResponse), 400: ErrorResponse, ...authErrors(ErrorResponse) },
      detail: {
        summary: 'Get the organization balance',
        description:
          'Amounts are integer USD nanos as decimal strings. When the top-up projection is unavailable only available_nanos and ' +
          'top_up_projection_state are returned; the omitted fields are never zero. A ledger outage is 503. Takes no query parameters (any is 400).',
      },
    },
  )
}
