import { describe, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { bootstrapIfEmpty } from '../../src/orgs/bootstrap'
import { buildTestApp, json } from '../support/harness'

describe('first-boot bootstrap', () => {
  test('creates the default org, an owner and a working admin key once', async () => {
    const t = await buildTestApp()
    const boot = await bootstrapIfEmpty(t.deps)
    expect(boot).not.toBeNull()
    const org = await t.deps.orgs.getOrg(boot!.orgId)
    expect(org).toMatchObject({ name: 'default', planId: t.deps.config.defaultPlanId })
    expect(await t.deps.orgs.roleOf(boot!.orgId, boot!.ownerUserId)).toBe('owner')
    const response = await t.request('GET', '/api/v1/api-keys', { key: boot!.secret })
    expect(response.status).toBe(200)
    expect((await json(response)).keys).toEqual([expect.objectContaining({ id: boot!.keyId, admin: true, name: 'bootstrap admin' })])
    expect(await bootstrapIfEmpty(t.deps)).toBeNull()
    expect(await t.deps.orgs.countOrgs()).toBe(1)
    // The configured starting credit (5 USD by default) is booked as a top-up, once.
    const balance = await t.request('GET', '/api/v1/billing/balance', { key: boot!.secret })
    expect(await json(balance)).toMatchObject({ top_up_projection_state: 'available', top_up_remaining_nanos: '5000000000', top_up_spent_nanos: '0' })
    await t.close()
  })

  test('racing bootstraps create exactly one organization', async () => {
    const t = await buildTestApp()
    const results = await Promise.all(Array.from({ length: 8 }, () => bootstrapIfEmpty(t.deps)))
    expect(results.filter(result => result !== null)).toHaveLength(1)
    expect(await t.deps.orgs.countOrgs()).toBe(1)
    await t.close()
  })

  test('a database that already has an organization is left alone', async () => {
    const t = await buildTestApp()
    await t.createOrg()
    expect(await bootstrapIfEmpty(t.deps)).toBeNull()
    expect(await t.deps.orgs.countOrgs()).toBe(1)
    await t.close()
  })

  test('the default plan is the first plan with Fusion access', () => {
    expect(loadConfig({}).defaultPlanId).toBe('pro')
    expect(loadConfig({ SVC_BOOTSTRAP: '0' }).bootstrap.enabled).toBe(false)
  })
})
