import { Parser } from 'htmlparser2'
import { cutText } from '../lib/characters'
import { CELL_GAP, cellSpans, TableLayout } from './html-tables'
import { clean, oneLine, toIsoDate } from './page-text'

/** What a page says about itself. */
export interface ReadablePage {
  title: string
  text: string
  /** The page's own modification date (ISO 8601), from its metadata; null when it has none. */
  modified: string | null
}

// Why a streaming walk over htmlparser2 rather than a DOM: measured on this machine, Mozilla's
// Readability on linkedom took 1.5 s for a 200 KB page and html-to-text 1.9 s for 1.7 MB, each
// blocking the event loop that serves every chat stream. htmlparser2 (the parser under both)
// reads 1.7 MB in ~0.3 s. Its open-element stack is quadratic in nesting depth, so hostile
// markup is cut off by depth, and the whole walk by a CPU budget.
const MAX_DEPTH = 512
const CHUNK = 16 * 1024
const BUDGET_MS = 400

// Elements whose text is never page content (chrome, code, form controls, embedded media). A
// <form> itself is not one: ASP.NET WebForms and similar wrap a whole page's body in one, so its
// text is kept and only its controls' (a button's label, a select's or datalist's options, a
// textarea's default text) are dropped; an <input> has no text.
// Nor is <head>: htmlparser2 does not close it where body content starts, as browsers do (the
// "in head" insertion mode ends at any element or non-blank text head cannot hold), so a valid
// page that omits </head> and <body> would lose its body. What head may hold is skipped anyway
// (title, script, style, template) or has no text (meta, link, base, and a <noscript> of those):
// so anything else is read, as from the body.
// Nor is <noscript>: the fetcher runs no scripts, so, like a browser with scripting disabled, it
// renders a <noscript>'s content as part of the page (often all a script-drawn page offers).
const SKIPPED = new Set([
  'title', 'script', 'style', 'template', 'svg', 'math', 'canvas', 'iframe', 'object', 'embed',
  'nav', 'aside', 'button', 'select', 'datalist', 'textarea',
])
// A <header> or <footer> is the page's banner or footer only outside sectioning content and <main>
// (HTML, "the header element"; HTML-AAM maps it to a landmark only there). Inside an <article> or
// <section> it is that part's own: an article's headline and byline (WordPress's
// header.entry-header > h1.entry-title). <nav> and <aside> are skipped whole, so are not counted.
const PAGE_CHROME = new Set(['header', 'footer'])
const SECTIONING = new Set(['article', 'main', 'section'])
// Elements that start a new line of text (display: block in browsers' default style sheet).
const BLOCKS = new Set([
  'address', 'article', 'blockquote', 'br', 'caption', 'center', 'dd', 'details', 'dialog', 'div', 'dl', 'dt', 'fieldset', 'figcaption', 'figure', 'footer',
  'form', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'header', 'hgroup', 'hr', 'legend', 'li', 'main', 'menu', 'ol', 'p', 'pre', 'search', 'section',
  'summary', 'table', 'ul',
])
// Table structure (laid out by ./html-tables.ts): cells, rows, and the row groups that end a row.
const CELLS = new Set(['td', 'th'])
const ROW_GROUPS = new Set(['thead', 'tbody', 'tfoot'])
// Elements that are void in HTML (never closed, so never on the depth count).
const VOID = new Set(['area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'link', 'meta', 'source', 'track', 'wbr'])
// Page metadata naming the last modification (property, name, itemprop or http-equiv).
const MODIFIED_KEYS = ['article:modified_time', 'og:updated_time', 'datemodified', 'last-modified', 'dcterms.modified', 'dc.date.modified']
// Where a page keeps its main content. <main> is the page's dominant content by definition, so
// its text is preferred over the body's when it has substance. An <article> is any self-contained
// part (a post, but also a comment or a "related" teaser), so the articles' text is preferred only
// when together they hold three quarters of the body's, or the largest alone 40% (one story beside
// a cookie banner, a "most read" list and a footer in <div>s): a story in a <div> beside a few
// teasers in <article>s, or a recipe with one <article class="comment">, is read from the body,
// whole. Known and accepted: a short story in a <div> beside many teasers that together pass
// three quarters still gives the teasers.
const MAIN_MIN_CHARS = 200
const ARTICLES_MIN_SHARE = 0.75
const ARTICLE_MIN_SHARE = 0.4
// The regions a token of text is in.
const IN_MAIN = 1
const IN_ARTICLE = 2
// Stands for the text of one <pre> in the collected text while the rest is cleaned (NUL, like every
// control character, is never page text: it is dropped from what the page says).
const PRE_MARK = /\u0000(\d+)\u0000/
// HTML's ASCII whitespace (WHATWG Infra). Outside <pre> a run of it renders as one space, wherever
// the source broke its lines: line breaks come from block elements and <br> only.
const HTML_WHITESPACE = /[ \t\n\r\f]+/g
// Control characters other than HTML's whitespace: never rendered, so never read.
const CONTROLS = /[\u0000-\u0008\u000b\u000e-\u001f\u007f]/g

/**
 * HTML → readable text, title and modification date. Chrome (navigation, the page's header and
 * footer, asides, form controls) and code are dropped, whitespace is collapsed as a browser
 * renders it, block structure becomes line breaks, list items become "- " lines, tables are laid
 * out by ./html-tables.ts (a data row a tab-separated line), a <pre> keeps its
 * whitespace and lines (code stays readable), and the text of <main>, or of the <article>s when
 * they (or the largest) hold most of the page's, is preferred (MAIN_MIN_CHARS).
 * `maxChars` caps the text collected (the walk stops there). `xhtml`: the page is XHTML
 * (application/xhtml+xml), where `<iframe/>` or `<script/>` closes itself; in HTML the "/" means
 * nothing, and the element runs on.
 */
export function htmlToText(html: string, maxChars: number, options: { xhtml?: boolean } = {}): ReadablePage {
  // The text as written, token by token, with where each token stands: its regions (IN_MAIN,
  // IN_ARTICLE) and the <pre> it belongs to (-1 for none). Tables rewrite their placeholder tokens.
  const tokens: string[] = []
  const regionsOf: number[] = []
  const preOf: number[] = []
  const articleSpans: [number, number][] = [] // each outermost <article>'s tokens
  let articleStart = 0
  let allChars = 0
  let depth = 0
  let skipDepth = 0 // > 0 while inside a skipped element
  let mainDepth = 0 // > 0 while inside <main>
  let articleDepth = 0 // > 0 while inside <article>
  let sectioningDepth = 0 // > 0 while inside <article>/<main>/<section>
  let preDepth = 0 // > 0 while inside <pre>: its text is the last <pre>'s, verbatim
  let preCount = 0
  // A list item's line and "- " wait for its text, and are written with it: an empty item leaves
  // no line, and the blocks a "loose" item wraps its text in (<li><p>…) start no new line until then.
  let bulletWaits = false
  let titleText: string | null = null
  let inTitle = false
  let ogTitle: string | undefined
  let modified: string | null = null
  let jsonLd = ''
  let inJsonLd = false
  let stop = false

  const emit = (text: string): number => {
    allChars += text.length
    if (allChars > maxChars * 2) stop = true
    regionsOf.push((mainDepth > 0 ? IN_MAIN : 0) | (articleDepth > 0 ? IN_ARTICLE : 0))
    preOf.push(preDepth > 0 ? preCount - 1 : -1)
    return tokens.push(text) - 1
  }
  const tables = new TableLayout(tokens, emit, maxChars)
  const lineBreak = () => tables.lineBreak(emit('\n'))

  const parser = new Parser(
    {
      onopentag(name, attributes) {
        if (!VOID.has(name)) depth += 1
        if (depth > MAX_DEPTH) stop = true
        // A page's title is the first <title> outside a skipped element (an <svg>'s or a <template>'s is not it).
        if (name === 'title' && titleText === null && skipDepth === 0) inTitle = true
        if (name === 'meta') {
          const key = (attributes.property ?? attributes.name ?? attributes.itemprop ?? attributes['http-equiv'] ?? '').toLowerCase()
          if (key === 'og:title') ogTitle ??= attributes.content
          if (modified === null && MODIFIED_KEYS.includes(key) && attributes.content) modified = toIsoDate(attributes.content)
        }
        if (name === 'script' && attributes.type === 'application/ld+json') inJsonLd = true
        // A <dialog> is shown only while open (a closed one is a modal's or a menu's markup in waiting).
        const closedDialog = name === 'dialog' && attributes.open === undefined
        if (skipDepth > 0 || SKIPPED.has(name) || closedDialog || (PAGE_CHROME.has(name) && sectioningDepth === 0) || isHidden(attributes)) {
          if (!VOID.has(name)) skipDepth += 1
          return
        }
        if (name === 'main') mainDepth += 1
        if (name === 'article' && articleDepth++ === 0) articleStart = tokens.length
        if (SECTIONING.has(name)) sectioningDepth += 1
        if (name === 'tr') tables.startRow()
        else if (CELLS.has(name)) tables.startCell(cellSpans(attributes))
        else if (ROW_GROUPS.has(name)) tables.startRowGroup()
        // A list item's line starts with its text (bulletWaits).
        else if (BLOCKS.has(name) && name !== 'li' && (!bulletWaits || name === 'pre')) lineBreak()
        if (name === 'table') tables.startTable()
        if (name === 'caption') tables.startCaption()
        bulletWaits = name === 'li' || (bulletWaits && name !== 'pre')
        if (name === 'pre') {
          tables.pre()
          if (preDepth === 0) emit(`\u0000${preCount++}\u0000`)
          preDepth += 1
        }
      },
      ontext(text) {
        if (inTitle) titleText = (titleText ?? '') + text
        if (inJsonLd && jsonLd.length < 65_536) jsonLd += text
        if (skipDepth > 0) return
        const kept = text.replace(CONTROLS, '')
        if (kept.trim() === '') {
          if (tables.dropsBlank()) return
        } else {
          tables.text()
          if (bulletWaits) {
            bulletWaits = false
            lineBreak()
            emit('- ')
          }
        }
        emit(preDepth > 0 ? kept : kept.replace(HTML_WHITESPACE, ' '))
      },
      onclosetag(name, implied) {
        if (!VOID.has(name)) depth = Math.max(0, depth - 1)
        if (name === 'title') inTitle = false
        if (name === 'script') inJsonLd = false
        if (skipDepth > 0) {
          if (!VOID.has(name)) skipDepth -= 1
          return
        }
        if (name === 'main') mainDepth = Math.max(0, mainDepth - 1)
        if (name === 'article' && articleDepth > 0 && --articleDepth === 0) articleSpans.push([articleStart, tokens.length])
        if (SECTIONING.has(name)) sectioningDepth = Math.max(0, sectioningDepth - 1)
        if (name === 'pre' && preDepth > 0) preDepth -= 1
        if (name === 'table') tables.endTable()
        else if (name === 'tr') tables.endRow()
        else if (CELLS.has(name)) tables.endCell()
        else if (ROW_GROUPS.has(name)) tables.endRowGroup()
        else if (name === 'caption') tables.endCaption()
        // A list item's line ends where the next one (or the list) starts.
        if (name === 'li') bulletWaits = false
        else if (BLOCKS.has(name) && !bulletWaits && !(implied && VOID.has(name))) lineBreak()
      },
    },
    { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true, recognizeSelfClosing: options.xhtml === true },
  )
  const started = performance.now()
  for (let offset = 0; offset < html.length && !stop; offset += CHUNK) {
    parser.write(html.slice(offset, offset + CHUNK))
    if (performance.now() - started > BUDGET_MS) stop = true
  }
  // end() closes every open element one by one: skip it for markup cut off for depth or time.
  if (!stop) parser.end()
  // Tables left open by a cut-off walk are laid out as far as they were read.
  tables.endAll()
  if (articleDepth > 0) articleSpans.push([articleStart, tokens.length])

  if (modified === null && jsonLd !== '') {
    const match = /"dateModified"\s*:\s*"([^"]{4,64})"/.exec(jsonLd)
    if (match) modified = toIsoDate(match[1]!)
  }
  const pres: string[] = Array.from({ length: preCount }, () => '')
  const all: string[] = []
  const main: string[] = []
  const articles: string[] = []
  for (const [index, token] of tokens.entries()) {
    const pre = preOf[index]!
    if (pre >= 0) pres[pre] += token
    else {
      all.push(token)
      if (regionsOf[index]! & IN_MAIN) main.push(token)
      if (regionsOf[index]! & IN_ARTICLE) articles.push(token)
    }
  }
  // The largest <article>'s text, measured only when the articles' together do not settle it.
  const largestArticle = () => articleSpans.reduce((largest, [from, to]) => {
    const parts = tokens.slice(from, to).filter((_, index) => preOf[from + index]! < 0)
    return Math.max(largest, withPres(parts, pres).length)
  }, 0)
  const text = preferred(withPres(all, pres), withPres(main, pres), withPres(articles, pres), largestArticle)
  return { title: cutText(oneLine(titleText ?? ogTitle ?? ''), 1000), text: cutText(text, maxChars), modified }
}

/** The text read: <main>'s or the articles' when they hold the page's content (MAIN_MIN_CHARS), else the body's. */
function preferred(body: string, main: string, articles: string, largestArticle: () => number): string {
  if (main.length >= MAIN_MIN_CHARS) return main
  if (articles.length < MAIN_MIN_CHARS) return body
  if (articles.length >= body.length * ARTICLES_MIN_SHARE) return articles
  const largest = largestArticle()
  return largest >= MAIN_MIN_CHARS && largest >= body.length * ARTICLE_MIN_SHARE ? articles : body
}

/**
 * Whether an element's own markup hides it from a reader, so its text (a cheap place for prompt
 * injection, never shown on the page) is not read: the `hidden` attribute (but `until-found`,
 * whose text the browser's find-in-page reveals), or an inline style of `display: none` or
 * `visibility: hidden`/`collapse`. Not `aria-hidden`: it hides from assistive technology only, and
 * server-rendered apps set it on their whole wrapper while a dialog is open (QA: such a page came
 * back empty, and billed). Classes and stylesheets are not evaluated; a descendant made visible
 * again by its own style stays skipped.
 */
/**
 * CSS text without its comments, in one pass: an unclosed one runs to the end (as in CSS). A lazy
 * /\/\*[\s\S]*?\*\// scanned to the end from every unclosed "/*" (QA: 360 KB of them held the
 * event loop 9.5 s, inside one attribute, where the walk's time budget is not checked).
 */
function withoutComments(css: string): string {
  let out = ''
  let at = 0
  for (let open = css.indexOf('/*'); open >= 0; open = css.indexOf('/*', at)) {
    out += css.slice(at, open)
    const close = css.indexOf('*/', open + 2)
    if (close < 0) return out
    at = close + 2
  }
  return out + css.slice(at)
}

function isHidden(attributes: Record<string, string>): boolean {
  if (attributes.hidden !== undefined && attributes.hidden.trim().toLowerCase() !== 'until-found') return true
  if (attributes.style === undefined) return false
  // CSS cascade within one style attribute: the last declaration of a property wins, unless an
  // earlier one is !important and it is not. Comments and case do not matter.
  const declared = new Map<string, { value: string; important: boolean }>()
  for (const declaration of withoutComments(attributes.style).split(';')) {
    const colon = declaration.indexOf(':')
    if (colon < 0) continue
    const property = declaration.slice(0, colon).trim().toLowerCase()
    if (property !== 'display' && property !== 'visibility') continue
    let value = declaration.slice(colon + 1).trim().toLowerCase()
    // Cut at the "!" rather than matching the spaces before it: /\s*!…$/ backtracks quadratically over a long run of them.
    const flag = /!\s*important$/.exec(value)
    const important = flag !== null
    if (flag !== null) value = value.slice(0, flag.index).trimEnd()
    if (important || !declared.get(property)?.important) declared.set(property, { value, important })
  }
  const visibility = declared.get('visibility')?.value
  return declared.get('display')?.value === 'none' || visibility === 'hidden' || visibility === 'collapse'
}

/**
 * The collected text cleaned (./page-text.ts), but for each <pre>'s, which is kept as written: its
 * spaces, tabs and blank lines, less blank lines at its start and whitespace at its end. A <pre>
 * is a block of its own, set apart by a blank line. Cell gaps become tabs (./html-tables.ts wrote
 * none after a row's last value). Every pass is linear: a page of 200,000 empty cells is text too.
 */
function withPres(parts: string[], pres: string[]): string {
  const cleaned = clean(parts.join(''))
  const text = cleaned.includes(CELL_GAP) ? cleaned.replace(/ ?\u0001 ?/g, '\t') : cleaned
  const pieces = text.split(PRE_MARK)
  if (pieces.length === 1) return pieces[0]!
  const blocks: string[] = []
  for (const [index, piece] of pieces.entries()) {
    const block = index % 2 === 0 ? piece.replace(/^\n+|\n+$/g, '') : pres[Number(piece)]!.replaceAll(CELL_GAP, '\t').replace(/\r\n?/g, '\n').replace(/^(?:[ \t]*\n)+/, '').trimEnd()
    if (block !== '') blocks.push(block)
  }
  return blocks.join('\n\n')
}
