/**
 * Characters in `text` as a person reading it counts them: Unicode code points (an emoji is one,
 * where `length` counts two UTF-16 units). The string iterator yields one per code point, a lone
 * surrogate once.
 */
export function characterCount(text: string): number {
  let count = 0
  for (const _ of text) count++
  return count
}
