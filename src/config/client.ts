// The settings of the CLI's client commands (chat, fusion, login, logout, encrypted-chat). They
// talk to a gateway over HTTP, so they read only these variables, never the server's config
// file or the provider secrets it names: a workstation has neither.
import { homedir } from 'node:os'
import { join } from 'node:path'
import { ConfigError, parsePort } from './load'

type Env = Record<string, string | undefined>

/** What a client command needs: the gateway, a key, and where `svc login` keeps its token. */
export interface ClientConfig {
  /** SVC_URL without trailing slashes, else this machine's PORT on localhost. */
  readonly url: string
  /** Whether SVC_URL set `url` (a stored sign-in is for one gateway: src/operator/chat.ts). */
  readonly urlFromEnv: boolean
  /** SVC_API_KEY, if set. */
  readonly apiKey: string | undefined
  /**
   * Where `svc login` keeps its token: SVC_CONFIG_DIR, else $XDG_CONFIG_HOME/svc, else
   * ~/.config/svc. Resolved when called, so only a command that uses it needs a home directory;
   * throws one line naming the three variables when none resolves.
   */
  configDir(): string
}

/** Client settings from `env`; throws ConfigError for a bad PORT when SVC_URL does not replace it. */
export function loadClientConfig(env: Env): ClientConfig {
  let url = env.SVC_URL
  if (!url) {
    const problems: string[] = []
    const port = parsePort(env.PORT, problems)
    if (problems.length > 0) throw new ConfigError(problems)
    url = `http://localhost:${port}`
  }
  return Object.freeze({ url: url.replace(/\/+$/, ''), urlFromEnv: Boolean(env.SVC_URL), apiKey: env.SVC_API_KEY || undefined, configDir: () => configDir(env) })
}

function configDir(env: Env): string {
  if (env.SVC_CONFIG_DIR) return env.SVC_CONFIG_DIR
  if (env.XDG_CONFIG_HOME) return join(env.XDG_CONFIG_HOME, 'svc')
  if (env.HOME) return join(env.HOME, '.config', 'svc')
  let home: string
  try {
    // Without HOME, the user's passwd entry; a uid without one (a container's) has no home.
    home = homedir()
  } catch {
    throw new Error('no directory to keep the svc login token in: this user has no home directory; set SVC_CONFIG_DIR, XDG_CONFIG_HOME or HOME')
  }
  return join(home, '.config', 'svc')
}
