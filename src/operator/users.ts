import { ROLES, type Role } from '../db/schema'
import type { Deps } from '../deps'
import { normalizeEmail } from '../orgs/service'
import { checkFlags, idArgument, parseOptions, report, UsageError, type CliIo } from './io'

function parseRole(value: string): Role {
  if (!(ROLES as readonly string[]).includes(value)) throw new UsageError(`--role must be one of ${ROLES.join(', ')}`)
  return value as Role
}

/** `svc users add --org ORG --email E --role owner|admin|member [--json]` */
export function usersAdd(args: string[], io: CliIo): () => (deps: Deps) => Promise<void> {
  const { values } = parseOptions(args, { org: { type: 'string' }, email: { type: 'string' }, role: { type: 'string' }, json: { type: 'boolean' } }, ['org', 'email', 'role'])
  const role = parseRole(values.role!)
  // A malformed address is a usage error; "already a member" (from addUser) stays a failure.
  checkFlags({ email: '--email' }, () => normalizeEmail(values.email!))
  const orgId = idArgument(values.org!, '--org')
  return () => async deps => {
    const { userId, created } = await deps.orgs.addUser({ orgId, email: values.email!, role })
    report(io, values.json, { user_id: userId, org_id: orgId, role, created }, [
      `user ${userId} ${created ? 'created and ' : ''}added to ${orgId} as ${role}`,
    ])
  }
}

/** `svc users set-role --org ORG --user USER --role owner|admin|member [--json]` */
export function usersSetRole(args: string[], io: CliIo): () => (deps: Deps) => Promise<void> {
  const { values } = parseOptions(args, { org: { type: 'string' }, user: { type: 'string' }, role: { type: 'string' }, json: { type: 'boolean' } }, ['org', 'user', 'role'])
  const role = parseRole(values.role!)
  const orgId = idArgument(values.org!, '--org')
  const userId = idArgument(values.user!, '--user')
  return () => async deps => {
    await deps.orgs.setRole({ orgId, userId, role })
    report(io, values.json, { user_id: userId, org_id: orgId, role }, [`user ${userId} is now ${role} of ${orgId}`])
  }
}
