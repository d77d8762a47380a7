import { Elysia } from 'elysia'
import type { Deps } from './deps'
import { browserAccess, BrowserOrigins } from './http/cors'
import { openapiDocs } from './http/openapi'
import { settleReplySchemas } from './http/openapi-schemas'
import { requestContext } from './http/request-context'
import { RouteMethods } from './http/route-methods'
import { attestationRoutes } from './attestation/routes'
import { billingRoutes } from './billing/routes'
import { modelRoutes } from './catalog/routes'
import { documentRoutes } from './documents/routes'
import { fusionRoutes } from './fusion/routes'
import { inferenceRoutes } from './inference/routes'
import { keyRoutes } from './keys/routes'
import { rateLimitRoutes } from './limits/routes'
import { healthRoutes } from './observability/routes'
import { mcpRoutes } from './mcp/routes'
import { McpService } from './mcp/server'
import { createTools } from './mcp/tools'
import { consentRoutes } from './oauth/consent-routes'
import { oauthRoutes } from './oauth/routes'
import { OAUTH_PATHS, WELL_KNOWN_PATHS } from './oauth/server'
import { webRoutes } from './web/routes'
import packageJson from '../package.json'

/**
 * Builds the gateway's Elysia app from its dependencies. No I/O of its own: tests call
 * `app.handle(new Request(...))`; main.ts hands it to Bun.serve.
 */
export function createApp(deps: Deps) {
  // normalize: false makes unknown body fields a validation error instead of silently dropping them.
  const mcp = new McpService(createTools({ catalog: deps.catalog, pipeline: deps.pipeline, fusion: deps.fusion, web: deps.web }), deps.limits, packageJson.version, deps.mcpCalls, deps.metrics)
  // Browser MCP clients call /mcp and the OAuth endpoints it leads them to from other origins.
  const origins = new BrowserOrigins(deps.config.mcp.allowedOrigins, deps.config.oauth.issuer)
  const crossOrigin = ['/mcp', ...Object.values(WELL_KNOWN_PATHS), OAUTH_PATHS.register, OAUTH_PATHS.token, OAUTH_PATHS.revoke]
  // `standardHostname: false`: Elysia finds the path after `http://` (index 7), not after the 11
  // characters of the shortest usual host; a Host of 3 characters or fewer (`Host: api`) had the
  // path's first segment taken for part of the host (GET /v1/models routed as /models, and
  // /x/v1/models as /v1/models). The gateway serves plain HTTP (TLS ends at the proxy).
  const methods = new RouteMethods()
  const app = new Elysia({ normalize: false, handler: { standardHostname: false } })
    .use(requestContext(deps.logger, deps.requestLog, methods))
    .use(browserAccess(origins, crossOrigin))
    .use(openapiDocs(packageJson.version))
    .use(
      healthRoutes(deps.database, deps.lifecycle, deps.ledger.health, {
        registry: deps.metrics.registry,
        token: deps.config.metrics.token,
        onPublicPort: deps.config.metrics.token !== undefined && deps.config.metrics.port === undefined,
      }),
    )
    .use(modelRoutes(deps.catalog))
    .use(
      inferenceRoutes(
        deps.keys, deps.limits, deps.catalog, deps.pipeline,
        { catalog: deps.catalog, attestation: deps.attestation, metering: deps.metering, logger: deps.logger, clock: deps.clock, lifecycle: deps.lifecycle, metrics: deps.metrics },
      ),
    )
    .use(fusionRoutes(deps.keys, deps.limits, deps.fusion))
    .use(keyRoutes(deps.keys, deps.limits, deps.clock, deps.balance))
    .use(billingRoutes(deps.keys, deps.limits, deps.balance, deps.logger))
    .use(rateLimitRoutes(deps.keys, deps.limits))
    .use(documentRoutes(deps.keys, deps.limits, { metering: deps.metering, extractor: deps.extractor, config: deps.config.documents, clock: deps.clock, lifecycle: deps.lifecycle }))
    .use(oauthRoutes(deps.oauth))
    .use(consentRoutes(deps.oauth))
    .use(mcpRoutes(deps.keys, deps.oauth, mcp, origins))
    .use(attestationRoutes(deps.keys, deps.limits, deps.attestation))
    .use(webRoutes(deps.keys, deps.limits, deps.web))
  methods.learn(app.routes)
  settleReplySchemas(app.routes)
  return app
}

export type App = ReturnType<typeof createApp>
