// w:sym, the symbol a Word run shows in a given font, as text: officeparser drops it (docx-rewrite.ts).

/**
 * Adobe's Symbol font encoding (unicode.org, VENDORS/ADOBE/symbol.txt), 0x20–0x7E then 0xA0–0xFE;
 * "\uFFFD" where it has no character a reader needs: the radical extender (0x60) and the pieces of
 * large brackets, braces, integrals and arrows it maps to the private use area. Greek capitals and
 * mu as Greek letters (Δ, Ω, μ; the table also gives ∆, Ω, µ), the serif and sans-serif ®, © and ™
 * as the signs themselves.
 */
const SYMBOL_LOW = ' !∀#∃%&∋()∗+,−./0123456789:;<=>?≅ΑΒΧΔΕΦΓΗΙϑΚΛΜΝΟΠΘΡΣΤΥςΩΞΨΖ[∴]⊥_\uFFFDαβχδεφγηιϕκλμνοπθρστυϖωξψζ{|}∼'
const SYMBOL_HIGH = '€ϒ′≤⁄∞ƒ♣♦♥♠↔←↑→↓°±″≥×∝∂•÷≠≡≈…\uFFFD\uFFFD↵ℵℑℜ℘⊗⊕∅∩∪⊃⊇⊄⊂⊆∈∉∠∇®©™∏√⋅¬∧∨⇔⇐⇑⇒⇓◊〈®©™∑\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD〉∫⌠\uFFFD⌡\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD'

/**
 * The text of `<w:sym w:font w:char>`: a Symbol-font character (F020–F0FF, as Word writes it, or
 * 0020–00FF) through Adobe's table; another font's character as it is, unless it is in the range
 * F000–F0FF, where Word puts a symbol font's own codes (Wingdings' and the like: no Unicode meaning).
 */
export function symbolText(font: string | undefined, char: string | undefined): string {
  if (char === undefined || !/^[0-9A-Fa-f]{1,4}$/.test(char)) return ''
  const code = Number.parseInt(char, 16)
  const byte = code & 0xff
  if (font?.trim().toLowerCase() === 'symbol' && (code >> 8 === 0xf0 || code >> 8 === 0) && byte >= 0x20) {
    const shown = byte < 0x7f ? SYMBOL_LOW[byte - 0x20] : byte >= 0xa0 && byte < 0xff ? SYMBOL_HIGH[byte - 0xa0] : undefined
    return shown === undefined || shown === '\uFFFD' ? '' : shown
  }
  if (code >> 8 === 0xf0) return ''
  // Only characters XML allows in text.
  const allowed = code === 0x9 || code === 0xa || code === 0xd || (code >= 0x20 && code < 0xd800) || (code >= 0xe000 && code < 0xfffe)
  return allowed ? String.fromCharCode(code) : ''
}
