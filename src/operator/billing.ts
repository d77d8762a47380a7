import { switchPlan } from '../billing/plan-switch'
import { checkTopUpText } from '../billing/top-up'
import { verifyLedger } from '../billing/verify'
import type { Config } from '../config/config'
import type { Deps } from '../deps'
import { formatNanos, formatUsd } from '../lib/money'
import { amountFlag, checkFlags, idArgument, LedgerViolation, parseOptions, report, UsageError, type CliIo } from './io'

/** `svc credit --org ORG (--usd X | --nanos N) [--note TEXT] [--reference REF] [--json]`: a prepaid top-up. */
export function credit(args: string[], io: CliIo): () => (deps: Deps) => Promise<void> {
  const { values } = parseOptions(
    args,
    { org: { type: 'string' }, usd: { type: 'string' }, nanos: { type: 'string' }, note: { type: 'string' }, reference: { type: 'string' }, json: { type: 'boolean' } },
    ['org'],
  )
  if ((values.usd === undefined) === (values.nanos === undefined)) throw new UsageError('give exactly one of --usd and --nanos')
  // An empty reference would book without one, so a retried top-up would be booked again.
  if (values.reference !== undefined && values.reference.trim() === '') throw new UsageError('--reference must not be empty (omit it for a top-up without one)')
  // The ledger's own limits, checked before anything is booked: a usage error naming the flag.
  checkFlags({ note: '--note', reference: '--reference' }, () => checkTopUpText({ note: values.note, reference: values.reference }))
  const amount = values.usd !== undefined ? amountFlag('--usd', values.usd, 'usd', { positive: true }) : amountFlag('--nanos', values.nanos!, 'nanos', { positive: true })
  const orgId = idArgument(values.org!, '--org')
  return () => async deps => {
    await deps.orgs.requireOrg(orgId)
    const { applied } = await deps.ledger.topUp({ orgId, amount, note: values.note, reference: values.reference })
    const balance = await deps.balance(orgId)
    report(io, values.json, { org_id: orgId, amount_nanos: formatNanos(amount), applied, available_nanos: formatNanos(balance.availableNanos) }, [
      applied ? `credited ${formatUsd(amount)} USD to ${orgId}` : `reference ${values.reference} was already credited; nothing changed`,
      `available: ${formatUsd(balance.availableNanos)} USD`,
    ])
  }
}

/** `svc plans set --org ORG --plan P [--json]` */
export function plansSet(args: string[], io: CliIo): (config: Config) => (deps: Deps) => Promise<void> {
  const { values } = parseOptions(args, { org: { type: 'string' }, plan: { type: 'string' }, json: { type: 'boolean' } }, ['org', 'plan'])
  const orgId = idArgument(values.org!, '--org')
  return config => {
    if (!config.plans.has(values.plan!)) throw new UsageError(`--plan must be one of ${[...config.plans.keys()].join(', ')}`)
    return async deps => {
      await switchPlan(deps.writer, deps.plans, deps.clock, orgId, values.plan!)
      report(io, values.json, { org_id: orgId, plan: values.plan }, [`${orgId} is now on plan ${values.plan}`])
    }
  }
}

/** `svc ledger verify [--json]`: exit 1 with one line per violated invariant. */
export function ledgerVerify(args: string[], io: CliIo): () => (deps: Deps) => Promise<void> {
  const { values } = parseOptions(args, { json: { type: 'boolean' } })
  return () => async deps => {
    const violations = await verifyLedger(deps.database.client, { nowMs: deps.clock.now(), staleAfterMs: deps.config.ledger.instanceStaleAfterMs })
    report(io, values.json, { ok: violations.length === 0, violations }, violations.length === 0 ? ['ledger ok: every invariant holds'] : violations)
    if (violations.length > 0) throw new LedgerViolation(violations.length)
  }
}
