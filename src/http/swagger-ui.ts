import { Elysia } from 'elysia'
import { recordOf } from '../observability/request-log'
// `type: 'file'` gives a path that `bun build --compile` embeds, so /docs works offline.
import swaggerBundle from 'swagger-ui-dist/swagger-ui-bundle.js' with { type: 'file' }
import swaggerCss from 'swagger-ui-dist/swagger-ui.css' with { type: 'file' }
// The text itself (embedded too): it is inlined in the OAuth2 redirect page.
import oauth2RedirectScript from 'swagger-ui-dist/oauth2-redirect.js' with { type: 'text' }

const ASSET_CACHE = 'public, max-age=86400'

/** Where Swagger UI's OAuth2 popup lands: the redirect URI a client registers to authorize from /docs. */
export const OAUTH2_REDIRECT_PATH = '/docs/oauth2-redirect.html'

// Swagger UI sends oauth2RedirectUrl as the redirect_uri unresolved, so it must be absolute; it
// is built in the browser from the page's origin (never from a Host header into a page). PKCE
// is an initOAuth option: in the bundle's own options it only changes a label.
const INIT = `window.onload = () => {
  window.ui = SwaggerUIBundle({ url: 'openapi.json', dom_id: '#swagger-ui', oauth2RedirectUrl: location.origin + ${JSON.stringify(OAUTH2_REDIRECT_PATH)} })
  window.ui.initOAuth({ usePkceWithAuthorizationCodeGrant: true })
}`

function docsPage(title: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<link rel="stylesheet" href="/docs-assets/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs-assets/swagger-ui-bundle.js"></script>
<script>
${INIT}
</script>
</body>
</html>`
}

// swagger-ui-dist's oauth2-redirect.html loads this script by a relative URL; inlined, the page
// needs nothing else, and its policy allows that one script by hash and nothing more.
const REDIRECT_PAGE = `<!doctype html><html lang="en-US"><head><meta charset="utf-8"><title>Swagger UI: OAuth2 redirect</title></head><body><script>${oauth2RedirectScript}</script></body></html>`
const REDIRECT_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  // Its URL carries the authorization code: not stored, not passed on as a Referer.
  'cache-control': 'no-store',
  'referrer-policy': 'no-referrer',
  'content-security-policy': `default-src 'none'; script-src 'sha256-${new Bun.CryptoHasher('sha256').update(oauth2RedirectScript).digest('base64')}'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
}

/**
 * Swagger UI at /docs, with its script, stylesheet and OAuth2 redirect page served by the
 * gateway itself (the OpenAPI plugin's page loads them from a public CDN and cannot call
 * initOAuth). Hidden from the document: they describe the API, they are not part of it.
 */
export function swaggerUi(title: string) {
  const page = docsPage(title)
  return new Elysia()
    // The page loads the spec by the relative URL "openapi.json", which from /docs/ would be
    // /docs/openapi.json: send the trailing-slash form to /docs.
    // Answered before routing, so the request's log line and metrics are written here. Only the
    // path /docs/ itself, with its query (QA: /docs/?x=1 was the page, which then found no document).
    .onRequest(({ request }) => {
      // Every request passes here: a scan of the URL's end, and of a query only right after /docs/.
      const url = request.url
      if (!url.endsWith('/docs/') && !url.includes('/docs/?')) return
      const { pathname, search } = new URL(url)
      if (pathname !== '/docs/') return
      const record = recordOf(request)
      if (record !== undefined) record.sink.respond(record, '/docs/', 308)
      // Relative: an absolute URL would be built from the Host header a client chose, and a 308 is cacheable.
      return new Response(null, { status: 308, headers: { location: `/docs${search}` } })
    })
    .get('/docs', () => new Response(page, { headers: { 'content-type': 'text/html; charset=utf-8' } }), { detail: { hide: true } })
    .get(OAUTH2_REDIRECT_PATH, () => new Response(REDIRECT_PAGE, { headers: REDIRECT_HEADERS }), { detail: { hide: true } })
    .get(
      '/docs-assets/swagger-ui-bundle.js',
      () => new Response(Bun.file(swaggerBundle), { headers: { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': ASSET_CACHE } }),
      { detail: { hide: true } },
    )
    .get(
      '/docs-assets/swagger-ui.css',
      () => new Response(Bun.file(swaggerCss), { headers: { 'content-type': 'text/css; charset=utf-8', 'cache-control': ASSET_CACHE } }),
      { detail: { hide: true } },
    )
}
