import type { ModelRoute, PrivacyLevel } from '../catalog/types'
import { ApiError } from '../http/errors'

/** What Fusion needs of the catalog: an id as a client writes it → its route, or a 400. */
export interface RouteResolver {
  resolve(id: string): ModelRoute
}

/** How much each level protects: a judge may never sit below the participants it reads. */
const RANK: Record<PrivacyLevel, number> = { anonymous: 0, private: 1, confidential: 2, encrypted: 3 }

/** The participants and judge of one Fusion request, resolved and checked against the level rules. */
export interface FusionRoutes {
  readonly participants: readonly ModelRoute[]
  readonly judge: ModelRoute
  /** Confidential participants: the judge is Confidential too and the result carries attestation fields. */
  readonly confidential: boolean
}

/**
 * Resolves the participant ids and the judge (spec §4.5, issue 9 point 4):
 * - 2 or 3 ids, each in the catalog, distinct logical models (`a` and `a:confidential` are the
 *   same model) → else 400 naming `models` or `models.N`;
 * - Encrypted participants (and judges) → 400: the gateway cannot read their answers to
 *   synthesise them, and Encrypted chat exists only on /v1/chat/completions;
 * - Anonymous and Private participants mix; Confidential ones combine only with Confidential;
 * - the judge is the request's `judge`, else the configured default. With Confidential
 *   participants it must be Confidential (a default judge is taken at its `:confidential`
 *   level when the catalog offers one). Otherwise it must not sit below the least private
 *   participant: all-Private participants never have their conversation sent to an Anonymous
 *   judge the caller did not choose.
 */
export function resolveFusionRoutes(catalog: RouteResolver, ids: readonly string[], requestedJudge: string | undefined, defaultJudge: string | undefined): FusionRoutes {
  if (ids.length < 2 || ids.length > 3) throw new ApiError('invalid_request', `models must list 2 or 3 distinct model ids, got ${ids.length}`, 'models')
  const participants = ids.map((id, index) => withParam(() => catalog.resolve(id), `models.${index}`))
  const seen = new Map<string, number>()
  participants.forEach((route, index) => {
    const earlier = seen.get(route.modelId)
    if (earlier !== undefined) {
      throw new ApiError('invalid_request', `models.${index} ("${route.id}") repeats models.${earlier}: Fusion needs 2 or 3 distinct models`, `models.${index}`)
    }
    seen.set(route.modelId, index)
    if (route.level === 'encrypted') {
      throw new ApiError('invalid_request', `models.${index} ("${route.id}") is Encrypted: Encrypted models cannot take part in Fusion (use POST /v1/chat/completions)`, `models.${index}`)
    }
  })
  const confidentialCount = participants.filter(route => route.level === 'confidential').length
  const confidential = confidentialCount === participants.length
  if (confidentialCount > 0 && !confidential) {
    throw new ApiError(
      'invalid_request',
      `Confidential models combine only with other Confidential models; got ${participants.map(route => `${route.id} (${route.level})`).join(', ')}`,
      'models',
    )
  }

  const judgeId = requestedJudge ?? defaultJudge
  if (judgeId === undefined) throw new ApiError('invalid_request', 'no default judge is configured on this gateway: name one with "judge"', 'judge')
  let judge = withParam(() => catalog.resolve(judgeId), 'judge')
  if (judge.level === 'encrypted') throw new ApiError('invalid_request', `judge "${judge.id}" is Encrypted: the judge must read the answers it synthesises`, 'judge')
  if (confidential && judge.level !== 'confidential') {
    const confidentialJudge = requestedJudge === undefined ? tryResolve(catalog, `${judge.modelId}:confidential`) : undefined
    if (!confidentialJudge) {
      throw new ApiError(
        'invalid_request',
        `the participants are Confidential, so the synthesis must be too, but judge "${judge.id}" is ${judge.level}: name a Confidential judge with "judge"`,
        'judge',
      )
    }
    judge = confidentialJudge
  }
  const floor = participants.reduce((lowest, route) => (RANK[route.level] < RANK[lowest] ? route.level : lowest), participants[0]!.level)
  if (RANK[judge.level] < RANK[floor]) {
    throw new ApiError(
      'invalid_request',
      `every participant is at least ${floor}, but judge "${judge.id}" is ${judge.level}: the conversation would leave the ${floor} level; name a ${floor} judge with "judge"`,
      'judge',
    )
  }
  return { participants, judge, confidential }
}

/** Re-labels a catalog 400 with the field it came from (`models.1`, `judge`). */
function withParam(resolve: () => ModelRoute, param: string): ModelRoute {
  try {
    return resolve()
  } catch (error) {
    if (error instanceof ApiError && error.code === 'invalid_request') throw new ApiError('invalid_request', `${param}: ${error.message}`, param)
    throw error
  }
}

function tryResolve(catalog: RouteResolver, id: string): ModelRoute | undefined {
  try {
    return catalog.resolve(id)
  } catch {
    return undefined
  }
}
