import type { Deps } from '../deps'
import { parseOptions, report, type CliIo } from './io'

/** `svc orgs create --name N [--owner EMAIL] [--plan P] [--json]`: an org, its owner and an admin key. */
export async function orgsCreate(deps: Deps, args: string[], io: CliIo): Promise<void> {
  const { values } = parseOptions(args, { name: { type: 'string' }, owner: { type: 'string' }, plan: { type: 'string' } }, ['name'])
  const { org, ownerUserId } = await deps.orgs.createOrg({ name: values.name!, planId: values.plan ?? deps.config.defaultPlanId, ownerEmail: values.owner })
  const { key, secret } = await deps.keys.create({ orgId: org.id, userId: ownerUserId, name: 'admin', admin: true, expiresAtMs: null, spendCap: null })
  report(io, values.json, { org_id: org.id, name: org.name, plan: org.planId, owner_user_id: ownerUserId, key_id: key.id, key: secret }, [
    `organization: ${org.id} (${org.name}, plan ${org.planId})`,
    `owner user:   ${ownerUserId}`,
    `admin key:    ${secret}`,
    'The key is shown only once; store it now.',
  ])
}
