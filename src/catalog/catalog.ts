import type { Config } from '../config/config'
import { ApiError } from '../http/errors'
import type { Capabilities, ModelRoute, Price, PrivacyLevel } from './types'

/** Every level in spec order (§1): the order levels are listed in. */
export const PRIVACY_LEVELS: readonly PrivacyLevel[] = ['anonymous', 'private', 'confidential', 'encrypted']

/** Levels that are selected by an id suffix (`model:confidential`); the others are the unsuffixed id. */
const SUFFIX_LEVELS: ReadonlySet<string> = new Set<PrivacyLevel>(['confidential', 'encrypted'])

/** One logical model with every level it is offered at. */
export interface CatalogModel {
  /** The logical id, without suffix. */
  readonly id: string
  /** The levels offered, in spec order. */
  readonly levels: readonly PrivacyLevel[]
  /** One callable route per level, in the same order as `levels`. */
  readonly routes: readonly ModelRoute[]
  readonly price: Price
  readonly capabilities: Capabilities
  readonly contextLength: number
  readonly maxOutputTokens: number
}

/**
 * The model catalog (spec §1, §4.11): logical model ids, each offered at one or more privacy
 * levels, resolved to callable routes. Built once from config; every route is a frozen object
 * made here, so resolving allocates nothing.
 */
export class Catalog {
  private readonly models: readonly CatalogModel[]
  private readonly byId: ReadonlyMap<string, CatalogModel>

  constructor(config: Pick<Config, 'models'>) {
    this.models = Object.freeze(
      config.models.map(model => {
        const route = (id: string, level: PrivacyLevel, backends: ModelRoute['backends']): ModelRoute =>
          Object.freeze({
            id,
            modelId: model.id,
            level,
            backends,
            routing: model.routing,
            price: model.price,
            capabilities: model.capabilities,
            contextLength: model.contextLength,
            maxOutputTokens: model.maxOutputTokens,
          })
        // The unsuffixed id first, then the suffix levels the model binds, in spec order.
        const routes = [route(model.id, model.level, model.backends)]
        if (model.confidential) routes.push(route(`${model.id}:confidential`, 'confidential', model.confidential))
        if (model.encrypted) routes.push(route(`${model.id}:encrypted`, 'encrypted', model.encrypted))
        return Object.freeze({
          id: model.id,
          levels: Object.freeze(routes.map(entry => entry.level)),
          routes: Object.freeze(routes),
          price: model.price,
          capabilities: model.capabilities,
          contextLength: model.contextLength,
          maxOutputTokens: model.maxOutputTokens,
        })
      }),
    )
    this.byId = new Map(this.models.map(model => [model.id, model]))
  }

  /**
   * The route for a model id as a client wrote it: the unsuffixed id is the model's own level
   * (anonymous or private); `:confidential` and `:encrypted` select those levels. Throws 400
   * `invalid_request` (param `model`) for an unknown model, an unknown suffix, or a level the
   * model does not offer.
   */
  resolve(id: string): ModelRoute {
    const colon = id.indexOf(':')
    const modelId = colon === -1 ? id : id.slice(0, colon)
    const model = this.byId.get(modelId)
    if (model === undefined) {
      throw new ApiError('invalid_request', `model "${clip(modelId)}" is not in the catalog (GET /v1/models lists the available models)`, 'model')
    }
    if (colon === -1) return model.routes[0]!
    const suffix = id.slice(colon + 1)
    if (!SUFFIX_LEVELS.has(suffix)) {
      throw new ApiError(
        'invalid_request',
        `"${clip(id)}": unknown level suffix ":${clip(suffix)}" (the suffixes are :confidential and :encrypted; the unsuffixed id is the ${model.levels[0]} level)`,
        'model',
      )
    }
    const index = model.levels.indexOf(suffix as PrivacyLevel)
    if (index === -1) throw new ApiError('invalid_request', `model ${model.id} is not offered at level ${suffix}`, 'model')
    return model.routes[index]!
  }

  /** The models, in config order; with `level`, only those offered at that level. */
  list(filter: { level?: PrivacyLevel } = {}): readonly CatalogModel[] {
    const level = filter.level
    return level === undefined ? this.models : this.models.filter(model => model.levels.includes(level))
  }
}

/** Echo client input in a message without letting a huge id bloat the error. */
function clip(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}…` : text
}
