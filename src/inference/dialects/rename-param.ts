import { ApiError } from '../../http/errors'

/**
 * An ApiError from the shared pipeline, whose checks name Chat Completions fields (`max_tokens`,
 * `messages`), renamed to the fields the client sent: its param, and every such field its message
 * names ("max_tokens 9000 exceeds…", "shorten the messages or lower max_tokens").
 */
export function renameParam(error: unknown, names: Readonly<Record<string, string>>): unknown {
  if (!(error instanceof ApiError) || error.param === undefined || !Object.hasOwn(names, error.param)) return error
  const fields = new RegExp(`\\b(${Object.keys(names).join('|')})\\b(?![.\\w])`, 'g')
  const message = error.message.replace(fields, field => names[field]!)
  return new ApiError(error.code, message, names[error.param]!, error.headers)
}
