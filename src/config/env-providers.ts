import { displayUrl } from '../observability/logger'
import { checkBaseUrl } from './providers'
import type { FileConfig, FileModel, FileProvider } from './schema'

/**
 * Providers the embedded default gains from the environment (ARCHITECTURE.md §3.2): with no
 * SVC_CONFIG, each variable that is set adds its provider and a short model list. Anything
 * more belongs in a config file. Entries are written in the config file's own shape, so they
 * pass the same checks as a file would.
 *
 * | Variable            | Provider id | Type              | Base URL                     | Retention | Models                                |
 * | ------------------- | ----------- | ----------------- | ---------------------------- | --------- | ------------------------------------- |
 * | `OPENAI_API_KEY`    | `openai`    | openai-compatible | https://api.openai.com/v1    | unknown   | gpt-4o-mini, gpt-4o (anonymous)        |
 * | `ANTHROPIC_API_KEY` | `anthropic` | anthropic         | https://api.anthropic.com/v1 | unknown   | claude-sonnet-4-5, claude-haiku-4-5 (anonymous) |
 * | `OLLAMA_BASE_URL`   | `ollama`    | openai-compatible | `${OLLAMA_BASE_URL}/v1`      | none      | llama3.2 (private, price 0)           |
 *
 * Prices are the vendors' list prices per million tokens when this table was written; an
 * operator who bills differently writes a config file.
 */
export const ENV_PROVIDERS: readonly EnvProvider[] = [
  {
    variable: 'OPENAI_API_KEY',
    provider: () => ({ id: 'openai', type: 'openai-compatible', base_url: 'https://api.openai.com/v1', api_key_env: 'OPENAI_API_KEY' }),
    models: [
      hosted('gpt-4o-mini', 'openai', { input_per_mtok: '0.15', output_per_mtok: '0.60', cached_input_per_mtok: '0.075' }, 128_000, 16_384, false),
      hosted('gpt-4o', 'openai', { input_per_mtok: '2.50', output_per_mtok: '10.00', cached_input_per_mtok: '1.25' }, 128_000, 16_384, false),
    ],
  },
  {
    variable: 'ANTHROPIC_API_KEY',
    provider: () => ({ id: 'anthropic', type: 'anthropic', base_url: 'https://api.anthropic.com/v1', api_key_env: 'ANTHROPIC_API_KEY' }),
    models: [
      hosted('claude-sonnet-4-5', 'anthropic', { input_per_mtok: '3', output_per_mtok: '15', cached_input_per_mtok: '0.30' }, 200_000, 64_000, true),
      hosted('claude-haiku-4-5', 'anthropic', { input_per_mtok: '1', output_per_mtok: '5', cached_input_per_mtok: '0.10' }, 200_000, 64_000, true),
    ],
  },
  {
    variable: 'OLLAMA_BASE_URL',
    // A local server keeps nothing beyond the operator's own machine, so it may serve `private`.
    provider: base => ({ id: 'ollama', type: 'openai-compatible', base_url: base.endsWith('/v1') ? base : `${base}/v1`, retention: 'none' }),
    models: [
      {
        id: 'llama3.2',
        level: 'private',
        backends: [{ provider: 'ollama', model: 'llama3.2' }],
        price: { input_per_mtok: '0', output_per_mtok: '0' },
        context_length: 131_072,
        max_output_tokens: 8192,
        capabilities: { tools: true },
      },
    ],
  },
]

/** One row of the table: the variable, the provider it adds (given the variable's value) and its models. */
export interface EnvProvider {
  readonly variable: 'OPENAI_API_KEY' | 'ANTHROPIC_API_KEY' | 'OLLAMA_BASE_URL'
  readonly provider: (value: string) => FileProvider
  readonly models: readonly FileModel[]
}

/**
 * The embedded default plus a provider for each table variable that is set (non-empty).
 * `value` reads a variable (load.ts is the only env reader). OLLAMA_BASE_URL must be an
 * http(s) URL; a bad one is reported by its variable name.
 */
export function withEnvProviders(file: FileConfig, value: (name: string) => string | undefined, problems: string[]): FileConfig {
  const providers = [...(file.providers ?? [])]
  const models = [...(file.models ?? [])]
  for (const row of ENV_PROVIDERS) {
    const raw = value(row.variable)
    if (!raw) continue
    let argument = raw
    if (row.variable === 'OLLAMA_BASE_URL') {
      const checked = checkBaseUrl(raw)
      if (typeof checked === 'object') {
        problems.push(`OLLAMA_BASE_URL: ${checked.problem}, got "${displayUrl(raw)}"`)
        continue
      }
      argument = checked
    }
    providers.push(row.provider(argument))
    models.push(...row.models)
  }
  return { ...file, providers, models }
}

function hosted(id: string, provider: string, price: FileModel['price'], context: number, maxOutput: number, reasoning: boolean): FileModel {
  return {
    id,
    level: 'anonymous',
    backends: [{ provider, model: id }],
    price,
    context_length: context,
    max_output_tokens: maxOutput,
    capabilities: { tools: true, reasoning, vision: true },
  }
}
