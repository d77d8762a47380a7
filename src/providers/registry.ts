import type { Config, ProviderConfig } from '../config/config'
import type { Provider } from './types'

/** Builds the adapter for one configured provider (each provider folder exports one). */
export type ProviderFactory = (config: ProviderConfig) => Provider

/**
 * One factory per provider type. A type no configured provider uses may be left out (the
 * attested adapter arrives later); a configured provider whose type has no factory fails
 * the boot, naming it.
 */
export type ProviderFactories = { readonly [Type in ProviderConfig['type']]?: ProviderFactory }

/**
 * The providers from config, keyed by their config id (the name a catalog backend uses).
 * Factories are passed in so this module imports no adapter folder, and tests can pass fakes.
 */
export function createProviders(config: Pick<Config, 'providers'>, factories: ProviderFactories): ReadonlyMap<string, Provider> {
  const providers = new Map<string, Provider>()
  for (const provider of config.providers) {
    const factory = factories[provider.type]
    if (factory === undefined) throw new Error(`provider "${provider.id}": no adapter for type ${provider.type} in this build`)
    // Config already refuses duplicate ids; a second one here would silently shadow the first.
    if (providers.has(provider.id)) throw new Error(`provider "${provider.id}" is configured twice`)
    providers.set(provider.id, factory(provider))
  }
  return providers
}
