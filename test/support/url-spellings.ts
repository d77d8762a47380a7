/**
 * Spellings of public image URLs that OpenAI and Anthropic take and the WHATWG parser rewrites,
 * each with the canonical href a backend must receive (the URL guard's `parsed` spelling; the
 * fetch's `exact` spelling refuses every one of them).
 */
export const REWRITTEN_SPELLINGS: ReadonlyArray<readonly [input: string, href: string]> = [
  ['https://CDN.Example.com/img.png', 'https://cdn.example.com/img.png'],
  ['HTTPS://cdn.example.com/x.png', 'https://cdn.example.com/x.png'],
  ['https://cdn.example.com:443/img.png', 'https://cdn.example.com/img.png'],
  ['http://cdn.example.com:80/img.png', 'http://cdn.example.com/img.png'],
  ['https://cdn.example.com/images/фото.jpg', 'https://cdn.example.com/images/%D1%84%D0%BE%D1%82%D0%BE.jpg'],
  ['https://bücher.de/img.png', 'https://xn--bcher-kva.de/img.png'],
  ["https://cdn.example.com/img.png?name=o'brien", 'https://cdn.example.com/img.png?name=o%27brien'],
  ['https://cdn.example.com/img.png?q="x"', 'https://cdn.example.com/img.png?q=%22x%22'],
  ['https://cdn.example.com/img.png?b=<x>', 'https://cdn.example.com/img.png?b=%3Cx%3E'],
  ['https://cdn.example.com/img{1}.png', 'https://cdn.example.com/img%7B1%7D.png'],
  ['https://cdn.example.com/img^1.png', 'https://cdn.example.com/img%5E1.png'],
  ['https://cdn.example.com/a/../img.png', 'https://cdn.example.com/img.png'],
]
