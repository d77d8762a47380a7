import type { Deps } from '../deps'
import { ApiError } from '../http/errors'
import { parseKeyOptions } from '../keys/request'
import { keyView } from '../keys/view'
import type { SpendCapPeriod } from '../db/schema'
import { systemClock } from '../lib/clock'
import { checkFlags, idArgument, parseOptions, report, reportKey, type CliIo } from './io'

/** `svc keys create --org ORG --user USER --name N [--admin] [--expires-in X] [--spend-cap-period P --spend-cap-nanos N] [--json]` */
export function keysCreate(args: string[], io: CliIo): () => (deps: Deps) => Promise<void> {
  const { values } = parseOptions(
    args,
    {
      org: { type: 'string' },
      user: { type: 'string' },
      name: { type: 'string' },
      admin: { type: 'boolean' },
      'expires-in': { type: 'string' },
      'spend-cap-period': { type: 'string' },
      'spend-cap-nanos': { type: 'string' },
      json: { type: 'boolean' },
    },
    ['org', 'user', 'name'],
  )
  // The same rules as POST /api/v1/api-keys; a bad value is a usage error naming its flag.
  const keyOptions = (nowMs: number) =>
    checkFlags({ name: '--name', expires_in: '--expires-in', spend_cap_period: '--spend-cap-period', spend_cap_nanos: '--spend-cap-nanos' }, () =>
      parseKeyOptions(
        {
          name: values.name!,
          admin: values.admin ?? false,
          expires_in: values['expires-in'],
          spend_cap_period: values['spend-cap-period'] as SpendCapPeriod | undefined,
          spend_cap_nanos: values['spend-cap-nanos'],
        },
        nowMs,
      ),
    )
  // Checked now, before the database is opened, on the wall clock (deps.clock is the same clock
  // on the command line); read again at creation, so a relative expiry counts from the key's creation.
  keyOptions(systemClock.now())
  const orgId = idArgument(values.org!, '--org')
  const userId = idArgument(values.user!, '--user')
  return () => async deps => {
    const options = keyOptions(deps.clock.now())
    await deps.orgs.requireOrg(orgId)
    const { key, secret } = await deps.keys.create({ orgId, userId, ...options })
    const lines = [`key ${key.id} (${key.name}${key.admin ? ', admin' : ''}): ${secret}`, 'The key is shown only once; store it now.']
    const failure = await reportKey(io, values.json, { key: { ...keyView(key), token: secret } }, lines, {
      what: `key ${key.id}`,
      keyId: key.id,
      revoke: () => deps.keys.revoke(orgId, key.id),
      remedy: 'Run the same svc keys create command again.',
    })
    if (failure) throw failure
  }
}

/** `svc keys list --org ORG [--json]` */
export function keysList(args: string[], io: CliIo): () => (deps: Deps) => Promise<void> {
  const { values } = parseOptions(args, { org: { type: 'string' }, json: { type: 'boolean' } }, ['org'])
  const orgId = idArgument(values.org!, '--org')
  return () => async deps => {
    await deps.orgs.requireOrg(orgId)
    const keys = (await deps.keys.list(orgId)).map(keyView)
    report(
      io,
      values.json,
      { keys },
      keys.length === 0 ? ['(no keys)'] : keys.map(key => `${key.id}  ${String(key.status).padEnd(7)}  ${key.admin ? 'admin' : '     '}  ${key.name}`),
    )
  }
}

/** `svc keys revoke KEY_ID [--json]`: the operator may revoke any organization's key. */
export function keysRevoke(args: string[], io: CliIo): () => (deps: Deps) => Promise<void> {
  const { values, positionals } = parseOptions(args, { json: { type: 'boolean' } }, [], 'KEY_ID')
  const keyId = idArgument(positionals[0]!, 'KEY_ID')
  return () => async deps => {
    const orgId = await deps.keys.orgOf(keyId)
    if (orgId === undefined || !(await deps.keys.revoke(orgId, keyId))) throw new ApiError('not_found', `no active or expired key ${keyId}`)
    report(io, values.json, { key_id: keyId, status: 'revoked' }, [`key ${keyId} revoked`])
  }
}
