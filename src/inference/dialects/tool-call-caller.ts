import { t } from 'elysia'
import { ApiError } from '../../http/errors'
import { cutText } from '../../lib/characters'

// Who made a tool call in a replayed history: OpenAI's Responses `function_call.caller`, Anthropic's
// `tool_use.caller`. The APIs write it on the calls they return (Anthropic's SDK types it as
// always present), so a transcript replayed as it came carries it. At its default, a direct call
// by the model, it is the plain call; a call made by a program (OpenAI's programmatic tool calls,
// Anthropic's code execution) belongs to a run no backend here has, so it is refused by name.

/** The field's schema on either wire: any caller object (or null); directCall decides. */
export const ToolCallCaller = t.Optional(
  t.Union([t.Object({ type: t.String() }, { additionalProperties: true }), t.Null()], { description: 'Only a direct call ({"type": "direct"}) is accepted; a call made by a program is refused (400)' }),
)

/** Refuses a caller other than a direct call, naming `param` (the caller field). */
export function directCall(caller: { type: string } | null | undefined, param: string): void {
  if (caller != null && caller.type !== 'direct') throw new ApiError('invalid_request', `a tool call made by a "${cutText(caller.type, 40)}" caller is not supported; only direct calls`, param)
}
