// The URLs a user's message names, for the hosted web tools.

// URLs in prose: scheme, then anything up to whitespace, a closing bracket or a quote. A `)` is
// taken too and trimmed afterwards unless the URL opened it (".../wiki/Mercury_(planet)"). An
// IPv6 literal host is bracketed ("http://[2606:4700::1111]:8080/"): its `]` belongs to the URL,
// so the host is taken whole first (it read "http://[2606:4700::1111", not an absolute URL).
// Quotes and brackets are typographic ones too (“…”, ‘…’, «…», „…“) and CJK and full-width
// punctuation (「…」, （…）, "，" or "。" right after the URL, as Chinese and Japanese prose has
// it): none can stand in a URL as the fetch takes it (canonical, so ASCII). Other non-ASCII
// characters (letters, dashes, symbols) do not end one: "…/wiki/Michelson–Morley_experiment" is
// one URL (refused as not canonical), not ".../wiki/Michelson", another page. The scheme starts a
// URL after anything but an ASCII letter or digit, so after Markdown's `_` or `*` emphasis too.
const URL_ENDS = String.raw`\s<>"'\x60\]}\p{Pi}\p{Pf}\u201a\u201e\u3001-\u3003\u3008-\u3011\u3014-\u301f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65`
const URL_IN_TEXT = new RegExp(String.raw`(?<![a-z0-9])https?:\/\/(?:\[[0-9a-f:.]+\][^${URL_ENDS}]*|[^${URL_ENDS}]+)`, 'giu')

/** Distinct URLs in order of mention, trailing sentence punctuation trimmed, at most `limit`. */
export function namedUrls(text: string, limit: number): string[] {
  const found: string[] = []
  for (const match of text.matchAll(URL_IN_TEXT)) {
    const url = trimTrailing(match[0])
    if (!found.includes(url)) found.push(url)
    if (found.length === limit) break
  }
  return found
}

/**
 * Drops trailing sentence punctuation, Markdown's emphasis (`*`, `_`, `~`, as GitHub's autolinks
 * drop them: "**https://…/bold**"), and every trailing `)` the URL itself did not open.
 */
function trimTrailing(url: string): string {
  let trimmed = url
  for (;;) {
    trimmed = trimmed.replace(/[.,;:!?*_~]+$/, '')
    const unbalanced = trimmed.endsWith(')') && trimmed.split('(').length < trimmed.split(')').length
    if (!unbalanced) return trimmed
    trimmed = trimmed.slice(0, -1)
  }
}
