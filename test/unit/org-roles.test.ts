import { afterEach, beforeEach, expect, test } from 'bun:test'
import { ApiError } from '../../src/http/errors'
import { buildTestApp, type TestApp, type TestOrg } from '../support/harness'

// OrgService.setRole: the last owner of an organization cannot be demoted, even by two demotions
// that run at the same time (two `svc users set-role` processes, QA).

let t: TestApp
let org: TestOrg
beforeEach(async () => {
  t = await buildTestApp()
  org = await t.createOrg()
})
afterEach(() => t.close())

async function owners(): Promise<number> {
  const result = await t.deps.database.client.execute({ sql: "SELECT count(*) AS n FROM memberships WHERE org_id = ? AND role = 'owner'", args: [org.orgId] })
  return Number(result.rows[0]!.n)
}

test('of two concurrent demotions of the last two owners, one is refused and one owner is left', async () => {
  const second = await t.createMember(org, 'owner')
  // Before, each read "2 owners" before either wrote, and both demotions succeeded: 0 owners.
  const outcomes = await Promise.allSettled([
    t.deps.orgs.setRole({ orgId: org.orgId, userId: org.ownerUserId, role: 'member' }),
    t.deps.orgs.setRole({ orgId: org.orgId, userId: second.userId, role: 'admin' }),
  ])
  expect(outcomes.filter(outcome => outcome.status === 'fulfilled')).toHaveLength(1)
  const refused = outcomes.find(outcome => outcome.status === 'rejected') as PromiseRejectedResult
  expect(refused.reason).toBeInstanceOf(ApiError)
  expect(refused.reason.message).toBe('cannot demote the last owner of an organization')
  expect(await owners()).toBe(1)
})

test('the guard refuses only what would leave no owner', async () => {
  const member = await t.createMember(org, 'member')
  // The last owner may stay owner; other members change freely; a second owner can be demoted.
  await t.deps.orgs.setRole({ orgId: org.orgId, userId: org.ownerUserId, role: 'owner' })
  await t.deps.orgs.setRole({ orgId: org.orgId, userId: member.userId, role: 'admin' })
  await t.deps.orgs.setRole({ orgId: org.orgId, userId: member.userId, role: 'owner' })
  await t.deps.orgs.setRole({ orgId: org.orgId, userId: org.ownerUserId, role: 'member' })
  expect(await t.deps.orgs.roleOf(org.orgId, org.ownerUserId)).toBe('member')
  expect(await owners()).toBe(1)
  await expect(t.deps.orgs.setRole({ orgId: org.orgId, userId: member.userId, role: 'member' })).rejects.toThrow('cannot demote the last owner')
  await expect(t.deps.orgs.setRole({ orgId: org.orgId, userId: 'nobody', role: 'member' })).rejects.toThrow('no such member in this organization')
  expect(await t.deps.orgs.roleOf(org.orgId, member.userId)).toBe('owner')
})
