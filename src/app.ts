import { Elysia } from 'elysia'
import type { Deps } from './deps'
import { openapiDocs } from './http/openapi'
import { requestContext } from './http/request-context'
import { billingRoutes } from './billing/routes'
import { modelRoutes } from './catalog/routes'
import { inferenceRoutes } from './inference/routes'
import { keyRoutes } from './keys/routes'
import { rateLimitRoutes } from './limits/routes'
import { faultAt } from './lib/fault-point'
import { healthRoutes } from './observability/routes'
import packageJson from '../package.json'

/**
 * Builds the gateway's Elysia app from its dependencies. No I/O of its own: tests call
 * `app.handle(new Request(...))`; main.ts hands it to Bun.serve.
 */
export function createApp(deps: Deps) {
  // normalize: false makes unknown body fields a validation error instead of silently dropping them.
  return new Elysia({ normalize: false })
    .use(requestContext(deps.logger, deps.requestLog))
    .use(openapiDocs(packageJson.version))
    .use(
      healthRoutes(deps.database, deps.lifecycle, {
        registry: deps.metrics.registry,
        token: deps.config.metrics.token,
        onPublicPort: deps.config.metrics.token !== undefined && deps.config.metrics.port === undefined,
      }),
    )
    .use(modelRoutes(deps.catalog))
    .use(inferenceRoutes(deps.keys, deps.limits, deps.catalog, {
        metering: deps.metering, router: deps.router, logger: deps.logger, clock: deps.clock, metrics: deps.metrics, lifecycle: deps.lifecycle,
        fault: faultAt(deps.config.faultPoint),
      }))
    .use(keyRoutes(deps.keys, deps.limits, deps.clock, deps.balance))
    .use(billingRoutes(deps.keys, deps.limits, deps.balance, deps.logger))
    .use(rateLimitRoutes(deps.keys, deps.limits))
}

export type App = ReturnType<typeof createApp>
