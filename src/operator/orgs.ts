import type { Config } from '../config/config'
import type { Deps } from '../deps'
import { formatNanos, formatUsd } from '../lib/money'
import { checkNewOrg } from '../orgs/service'
import { amountFlag, checkFlags, idArgument, parseOptions, report, reportKey, type CliIo } from './io'

/** `svc orgs create --name N [--owner EMAIL] [--plan P] [--credit-usd X] [--json]`: an org, its owner and an admin key. */
export function orgsCreate(args: string[], io: CliIo): (config: Config) => (deps: Deps) => Promise<void> {
  const { values } = parseOptions(
    args,
    { name: { type: 'string' }, owner: { type: 'string' }, plan: { type: 'string' }, 'credit-usd': { type: 'string' }, json: { type: 'boolean' } },
    ['name'],
  )
  const creditNanos = values['credit-usd'] === undefined ? 0n : amountFlag('--credit-usd', values['credit-usd'], 'usd', { positive: false })
  return config => {
    const input = { name: values.name!, planId: values.plan ?? config.defaultPlanId, ownerEmail: values.owner }
    // The name, plan and owner email, as createOrg checks them, before the database is opened.
    checkFlags({ name: '--name', plan: '--plan', owner: '--owner' }, () => checkNewOrg(input, new Set(config.plans.keys())))
    return deps => create(deps, io, values.json, input, creditNanos)
  }
}

/** orgsCreate on the database, its flags checked. */
async function create(
  deps: Deps,
  io: CliIo,
  json: boolean | undefined,
  input: { name: string; planId: string; ownerEmail?: string },
  creditNanos: bigint,
): Promise<void> {
  const { org, ownerUserId } = await deps.orgs.createOrg(input)
  const { key, secret } = await deps.keys.create({ orgId: org.id, userId: ownerUserId, name: 'admin', admin: true, expiresAtMs: null, spendCap: null })
  // The credit goes through the ledger writer, after the organization and key are committed: they
  // cannot be one transaction. When it fails, what exists is printed anyway (the key's secret
  // exists nowhere else), with the command that books the credit; its reference is this one, so
  // it books once even if the failed attempt did reach the ledger. Then the failure, exit 1.
  const reference = `orgs-create:${org.id}`
  let creditFailed = false
  let creditError: unknown
  try {
    if (creditNanos > 0n) await deps.ledger.topUp({ orgId: org.id, amount: creditNanos, reference, note: 'initial credit' })
  } catch (error) {
    creditFailed = true
    creditError = error
  }
  const credited = creditFailed ? 0n : creditNanos
  const outFailure = await reportKey(
    io,
    json,
    { org_id: org.id, name: org.name, plan: org.planId, owner_user_id: ownerUserId, key_id: key.id, key: secret, credit_nanos: formatNanos(credited) },
    [
      `organization: ${org.id} (${org.name}, plan ${org.planId})`,
      `owner user:   ${ownerUserId}`,
      `admin key:    ${secret}`,
      ...(credited > 0n ? [`credit:       ${formatUsd(credited)} USD`] : []),
      'The key is shown only once; store it now.',
    ],
    {
      what: `the admin key of organization ${org.id}`,
      keyId: key.id,
      revoke: () => deps.keys.revoke(org.id, key.id),
      remedy: `Create one with: svc keys create --org ${org.id} --user ${ownerUserId} --name admin --admin`,
    },
  )
  if (creditFailed) {
    io.err(
      `organization ${org.id} and its admin key ${key.id} were created, but the initial credit of ${formatUsd(creditNanos)} USD was not booked; ` +
        `book it with: svc credit --org ${org.id} --usd ${formatUsd(creditNanos)} --reference ${reference}`,
    )
    throw creditError
  }
  if (outFailure) throw outFailure
}

/** `svc orgs show ORG [--json]`: plan, balance and allowance left. */
export function orgsShow(args: string[], io: CliIo): () => (deps: Deps) => Promise<void> {
  const { values, positionals } = parseOptions(args, { json: { type: 'boolean' } }, [], 'ORG')
  const orgId = idArgument(positionals[0]!, 'ORG')
  return () => async deps => {
    const org = await deps.orgs.requireOrg(orgId)
    const balance = await deps.balance(org.id)
    const plan = deps.plans.get(org.planId)
    const keys = await deps.keys.list(org.id)
    const active = keys.filter(key => key.status === 'active').length
    report(
      io,
      values.json,
      {
        org_id: org.id, name: org.name, plan: org.planId, fusion: plan?.fusion ?? false,
        available_nanos: formatNanos(balance.availableNanos), prepaid_nanos: formatNanos(balance.prepaidNanos),
        allowance_left_nanos: formatNanos(balance.allowanceLeftNanos), active_keys: active, keys: keys.length,
      },
      [
        `organization ${org.id} (${org.name})`,
        `plan:           ${org.planId}${plan?.fusion ? ' (Fusion)' : ''}`,
        `available:      ${formatUsd(balance.availableNanos)} USD`,
        `prepaid:        ${formatUsd(balance.prepaidNanos)} USD`,
        `allowance left: ${formatUsd(balance.allowanceLeftNanos)} USD this month`,
        `keys:           ${active} active of ${keys.length}`,
      ],
    )
  }
}
