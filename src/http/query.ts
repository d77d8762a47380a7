import { ApiError } from './errors'

/**
 * The one check of query parameter names: a name `accepts` refuses is 400 naming it, with
 * `accepted` telling the client what the route takes; a name given twice is 400 unless
 * `repeatable`, so one copy never silently wins.
 */
export function checkQueryNames(
  params: URLSearchParams,
  accepted: string,
  accepts: (name: string) => boolean = () => false,
  repeatable: (name: string) => boolean = () => false,
): void {
  for (const name of new Set(params.keys())) {
    const shown = name.slice(0, 100)
    if (!accepts(name)) throw new ApiError('invalid_request', `unknown query parameter "${shown}" (${accepted})`, shown)
    if (params.getAll(name).length > 1 && !repeatable(name)) throw new ApiError('invalid_request', `${shown} may be given once`, shown)
  }
}

/**
 * For routes that take no query parameter. Called first in the handler, after the auth step,
 * so a bad credential is still 401 before the query is looked at.
 */
export function refuseQuery(request: Request): void {
  if (request.url.includes('?')) checkQueryNames(new URL(request.url).searchParams, 'this route takes none')
}
