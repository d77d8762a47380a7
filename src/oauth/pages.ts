/**
 * The server-rendered sign-in and consent pages (no front-end build, no script). Every
 * interpolated value is escaped; the pages refuse framing (clickjacking) and load nothing.
 */

const SCOPE_TEXT: Record<string, string> = {
  'mcp:inference': 'Use models, Fusion and web tools through MCP, billed to your organization',
  'cli:inference': 'Use models, Fusion, web fetch and document parsing from the command line, billed to your organization; manage API keys and read the balance if the key you sign in with is an admin key and you are an owner or admin',
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, char => `&#${char.charCodeAt(0)};`)
}

const STYLE = `body{font:16px/1.5 system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}.box{border:1px solid #ccc;border-radius:8px;padding:1rem 1.25rem;margin:1rem 0}
label{display:block;margin:.75rem 0 .25rem;font-weight:600}input[type=password],input[type=text]{width:100%;padding:.5rem;font:inherit;box-sizing:border-box}
.buttons{display:flex;gap:.75rem;margin-top:1rem}button{font:inherit;padding:.5rem 1.25rem;border-radius:6px;border:1px solid #888;cursor:pointer}
button[value=approve]{background:#1a5fd0;color:#fff;border-color:#1a5fd0}.error{color:#a00;font-weight:600}code{font-size:1.1rem}`

/** Headers of every page: no caching, no framing, nothing loaded from anywhere. */
export const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
  // same-origin, not no-referrer: with no-referrer Chromium sends `Origin: null` on the form post, which the CSRF check refuses.
  'referrer-policy': 'same-origin',
}

export function page(title: string, body: string, status = 200, headers: Record<string, string> = {}): Response {
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${escapeHtml(title)}</title><style>${STYLE}</style></head><body>${body}</body></html>`
  return new Response(html, { status, headers: { ...PAGE_HEADERS, ...headers } })
}

function hidden(fields: Record<string, string | undefined>): string {
  return Object.entries(fields)
    .filter(([, value]) => value !== undefined)
    .map(([name, value]) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value!)}">`)
    .join('')
}

/** The consent form: who asks, for what, and the API key field that signs the person in. */
export function consentPage(input: {
  action: string
  clientName: string
  /** The id of a client registered by anyone (not built in): the page marks it third-party and shows the id, since its name proves nothing. */
  thirdPartyClientId?: string
  scope: string
  fields: Record<string, string | undefined>
  csrf: string
  error?: string
  detail?: string
  status?: number
  cookie?: string
}): Response {
  const title = `Authorize ${input.clientName}${input.thirdPartyClientId !== undefined ? ' (third-party application)' : ''}`
  const thirdParty = input.thirdPartyClientId === undefined ? ''
    : `<p class="third-party"><strong>Third-party application.</strong> Its name was chosen by whoever registered it with this gateway: approve only if you started this sign-in from an application you trust. Client id: <code>${escapeHtml(input.thirdPartyClientId)}</code></p>`
  const body = `<h1>${escapeHtml(title)}</h1>
<div class="box">${thirdParty}<p><strong>${escapeHtml(input.clientName)}</strong> asks for access to your organization:</p>
<p><code>${escapeHtml(input.scope)}</code>: ${escapeHtml((Object.hasOwn(SCOPE_TEXT, input.scope) ? SCOPE_TEXT[input.scope] : undefined) ?? input.scope)}</p>${input.detail ? `<p>${input.detail}</p>` : ''}</div>
${input.error ? `<p class="error" role="alert">${escapeHtml(input.error)}</p>` : ''}
<form method="post" action="${escapeHtml(input.action)}">${hidden({ ...input.fields, csrf: input.csrf })}
<label for="api_key">Sign in with one of your organization API keys</label>
<input type="password" id="api_key" name="api_key" autocomplete="off" placeholder="z_sk_…">
<p>The key's secret is not stored or shared with the application. The access acts for you and the key's organization, and can never do more than the key: its spend cap, expiry and admin flag apply, and it ends when the key is revoked or expires.</p>
<div class="buttons"><button type="submit" name="decision" value="approve">Approve</button><button type="submit" name="decision" value="deny">Deny</button></div></form>`
  return page(title, body, input.status ?? 200, input.cookie ? { 'set-cookie': input.cookie } : {})
}

/** The first device page: type the code the terminal shows. */
export function deviceCodePage(action: string, error?: string, status = 200): Response {
  const body = `<h1>Connect a device</h1>${error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : ''}
<form method="get" action="${escapeHtml(action)}"><label for="user_code">Enter the code shown in your terminal</label>
<input type="text" id="user_code" name="user_code" autocomplete="off" placeholder="BCDF-GHJK" autofocus>
<div class="buttons"><button type="submit" value="approve">Continue</button></div></form>`
  return page('Connect a device', body, status)
}

export function messagePage(title: string, message: string, status = 200): Response {
  return page(title, `<h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p>`, status)
}
