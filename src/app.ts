import { Elysia } from 'elysia'
import type { Deps } from './deps'
import { openapiDocs } from './http/openapi'
import { requestContext } from './http/request-context'
import { billingRoutes } from './billing/routes'
import { modelRoutes } from './catalog/routes'
import { inferenceRoutes } from './inference/routes'
import { keyRoutes } from './keys/routes'
import { rateLimitRoutes } from './limits/routes'
import { healthRoutes } from './observability/routes'
import { webRoutes } from './web/routes'
import packageJson from '../package.json'

/**
 * Builds the gateway's Elysia app from its dependencies. No I/O of its own: tests call
 * `app.handle(new Request(...))`; main.ts hands it to Bun.serve.
 */
export function createApp(deps: Deps) {
  // normalize: false makes unknown body fields a validation error instead of silently dropping them.
  return new Elysia({ normalize: false })
    .use(requestContext(deps.logger))
    .use(openapiDocs(packageJson.version))
    .use(healthRoutes(deps.database))
    .use(modelRoutes(deps.catalog))
    .use(inferenceRoutes(deps.keys, deps.limits, deps.catalog, { metering: deps.metering, router: deps.router, logger: deps.logger, clock: deps.clock, web: deps.web }))
    .use(keyRoutes(deps.keys, deps.limits, deps.clock, deps.balance))
    .use(billingRoutes(deps.keys, deps.limits, deps.balance, deps.logger))
    .use(rateLimitRoutes(deps.keys, deps.limits))
    .use(webRoutes(deps.keys, deps.limits, deps.web))
}

export type App = ReturnType<typeof createApp>
