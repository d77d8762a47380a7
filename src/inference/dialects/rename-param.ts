import { ApiError } from '../../http/errors'

/**
 * An ApiError from the shared pipeline, whose checks name Chat Completions fields (`max_tokens`,
 * `messages`), renamed to the field the client sent: its param, and the message when it opens
 * with the field's name ("max_tokens 9000 exceeds…").
 */
export function renameParam(error: unknown, names: Readonly<Record<string, string>>): unknown {
  if (!(error instanceof ApiError) || error.param === undefined || !Object.hasOwn(names, error.param)) return error
  const name = names[error.param]!
  const message = error.message.startsWith(`${error.param} `) ? `${name}${error.message.slice(error.param.length)}` : error.message
  return new ApiError(error.code, message, name, error.headers)
}
