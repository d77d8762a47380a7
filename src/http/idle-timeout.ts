import { recordOf } from '../observability/request-log'

/** The listener's idle timeout in seconds (Elysia's default, set explicitly by main.ts). */
export const IDLE_TIMEOUT_S = 30

/** What this needs of Bun's server (null when the app is served some other way: tests' app.handle). */
type TimeoutServer = { timeout(request: Request, seconds: number): void } | null | undefined

/**
 * Lifts the idle timeout of the request's connection, so that a long generation or a slow
 * upstream is not cut, until the request is done (RequestLog.respond or, for a stream it
 * follows, RequestLog.end). Then the timeout comes back: a keep-alive connection left idle after
 * a chat, or a client that never reads its answer, is closed like any other. Without that, such
 * a connection was never closed by the gateway.
 */
export function liftIdleTimeout(server: TimeoutServer, request: Request): void {
  if (!server) return
  server.timeout(request, 0)
  const record = recordOf(request)
  if (record !== undefined) record.restoreIdle ??= () => server.timeout(request, IDLE_TIMEOUT_S)
}
