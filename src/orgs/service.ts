import { and, eq, sql } from 'drizzle-orm'
import type { Db } from '../db/client'
import { memberships, orgs, users, type Role } from '../db/schema'
import { ApiError } from '../http/errors'
import type { Clock } from '../lib/clock'
import { EMAIL } from '../lib/email'
import { newId } from '../lib/ids'
import { characterCount, nameTextProblem } from '../lib/characters'

/** Lower-cases and checks an email address; throws invalid_request naming the field. */
export function normalizeEmail(email: string, param = 'email'): string {
  const trimmed = email.trim().toLowerCase()
  if (!EMAIL.test(trimmed)) throw new ApiError('invalid_request', `${param} must be an email address`, param)
  return trimmed
}

/**
 * A new organization's fields checked (a nonblank name of at most 200 characters, a configured
 * plan, an owner email): the name trimmed and the email normalized. Pure, so the CLI checks its
 * flags with it before it opens the database; createOrg checks with it before it writes.
 */
export function checkNewOrg(input: { name: string; planId: string; ownerEmail?: string }, planIds: ReadonlySet<string>): { name: string; ownerEmail?: string } {
  const name = input.name.trim()
  if (name.length === 0 || characterCount(name) > 200) throw new ApiError('invalid_request', 'name must be 1 to 200 characters', 'name')
  // The same text rules as a key's name: it is printed raw (svc orgs show).
  const textProblem = nameTextProblem(name)
  if (textProblem !== undefined) throw new ApiError('invalid_request', `name ${textProblem}`, 'name')
  if (!planIds.has(input.planId)) {
    throw new ApiError('invalid_request', `unknown plan "${input.planId}" (configured: ${[...planIds].join(', ')})`, 'plan')
  }
  return { name, ownerEmail: input.ownerEmail === undefined ? undefined : normalizeEmail(input.ownerEmail, 'owner') }
}

export interface OrgRecord {
  id: string
  name: string
  planId: string
  createdAtMs: number
}

/** Organizations, users and their roles. Role changes notify listeners so auth caches drop at once. */
export class OrgService {
  private readonly roleListeners: Array<(userId: string) => void> = []

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly planIds: ReadonlySet<string>,
  ) {}

  /** Called with a user id whenever that user's role changes in any organization. */
  onRoleChange(listener: (userId: string) => void): void {
    this.roleListeners.push(listener)
  }

  /**
   * Creates an organization and its owner. Without an email the owner is a placeholder user
   * (an operator-created org whose keys are managed from the CLI).
   */
  async createOrg(input: { name: string; planId: string; ownerEmail?: string }): Promise<{ org: OrgRecord; ownerUserId: string }> {
    const { name, ownerEmail } = checkNewOrg(input, this.planIds)
    const org: OrgRecord = { id: newId(), name, planId: input.planId, createdAtMs: this.clock.now() }
    const email = ownerEmail ?? `owner+${org.id}@placeholder.invalid`
    const existing = await this.findUserByEmail(email)
    const ownerUserId = existing ?? newId()
    await this.db.batch([
      this.db.insert(orgs).values(org),
      ...(existing ? [] : [this.db.insert(users).values({ id: ownerUserId, email, createdAtMs: org.createdAtMs })]),
      this.db.insert(memberships).values({ orgId: org.id, userId: ownerUserId, role: 'owner', createdAtMs: org.createdAtMs }),
    ])
    return { org, ownerUserId }
  }

  async getOrg(orgId: string): Promise<OrgRecord | undefined> {
    const rows = await this.db.select().from(orgs).where(eq(orgs.id, orgId)).limit(1)
    return rows[0]
  }

  async countOrgs(): Promise<number> {
    const rows = await this.db.select({ n: sql<bigint>`count(*)` }).from(orgs)
    return Number(rows[0]?.n ?? 0)
  }

  /** Adds a user to an organization with a role, creating the user when the email is new. */
  async addUser(input: { orgId: string; email: string; role: Role }): Promise<{ userId: string; created: boolean }> {
    await this.requireOrg(input.orgId)
    const email = normalizeEmail(input.email)
    const existing = await this.findUserByEmail(email)
    const userId = existing ?? newId()
    if (existing && (await this.roleOf(input.orgId, existing))) {
      throw new ApiError('invalid_request', `${email} is already a member of this organization; use users set-role`, 'email')
    }
    const now = this.clock.now()
    const membership = this.db.insert(memberships).values({ orgId: input.orgId, userId, role: input.role, createdAtMs: now })
    if (existing) await membership
    else await this.db.batch([this.db.insert(users).values({ id: userId, email, createdAtMs: now }), membership])
    return { userId, created: !existing }
  }

  /**
   * Changes a member's role. The last owner cannot be demoted (the org would be unmanageable).
   * The owner count is checked inside the UPDATE itself: SQLite runs one statement under the
   * write lock, so of two concurrent demotions of an org's last two owners, one finds a single
   * owner left and changes nothing. A count read first, then an UPDATE, let both pass (QA).
   */
  async setRole(input: { orgId: string; userId: string; role: Role }): Promise<void> {
    const member = and(eq(memberships.orgId, input.orgId), eq(memberships.userId, input.userId))
    const otherOwners = sql`(SELECT count(*) FROM ${memberships} WHERE ${memberships.orgId} = ${input.orgId} AND ${memberships.role} = 'owner') > 1`
    const keepsAnOwner = input.role === 'owner' ? undefined : sql`(${memberships.role} <> 'owner' OR ${otherOwners})`
    const changed = await this.db.update(memberships).set({ role: input.role }).where(and(member, keepsAnOwner))
    if (changed.rowsAffected !== 1) {
      if (!(await this.roleOf(input.orgId, input.userId))) throw new ApiError('not_found', 'no such member in this organization', 'user')
      throw new ApiError('invalid_request', 'cannot demote the last owner of an organization', 'role')
    }
    for (const listener of this.roleListeners) listener(input.userId)
  }

  async roleOf(orgId: string, userId: string): Promise<Role | undefined> {
    const rows = await this.db
      .select({ role: memberships.role })
      .from(memberships)
      .where(and(eq(memberships.orgId, orgId), eq(memberships.userId, userId)))
      .limit(1)
    return rows[0]?.role
  }

  async requireOrg(orgId: string): Promise<OrgRecord> {
    const org = await this.getOrg(orgId)
    if (!org) throw new ApiError('not_found', `no organization ${orgId}`, 'org')
    return org
  }

  private async findUserByEmail(email: string): Promise<string | undefined> {
    const rows = await this.db.select({ id: users.id }).from(users).where(eq(users.email, email)).limit(1)
    return rows[0]?.id
  }
}
