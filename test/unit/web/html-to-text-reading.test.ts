import { describe, expect, test } from 'bun:test'
import { htmlToText } from '../../../src/web/html-to-text'

// What of a page htmlToText reads: which region is the content, and what each element adds.

const sentences = (word: string, count: number) => `${word} sentence. `.repeat(count).trim()

describe('htmlToText: the region read', () => {
  test('<article>s that are a small part of the page (teasers, a comment) do not replace the body', () => {
    // QA: any <article> with 200 characters won outright, so only the "related" teasers (or the one
    // comment) came back, and the story (the recipe) in its <div> was lost.
    const story = '<body><div class="story"><h1>Council approves the new bridge</h1>' +
      `<p>${sentences('Story', 120)}</p></div><h2>Related</h2>` +
      ['Budget', 'Traffic', 'Weather'].map(word => `<article class="teaser"><h3>${word}</h3><p>${sentences(word, 8)}</p></article>`).join('') + '</body>'
    const text = htmlToText(story, 100_000).text
    expect(text.startsWith('Council approves the new bridge\n\nStory sentence.')).toBe(true)
    expect(text).toContain('Related\n\nBudget')
    const recipe = `<div id="content"><h1>Pancakes</h1><ol><li>${sentences('Mix', 40)}</li><li>${sentences('Fry', 40)}</li></ol></div>` +
      `<article class="comment"><p>${sentences('Lovely', 30)}</p></article>`
    const read = htmlToText(recipe, 100_000).text
    expect(read.startsWith('Pancakes\n\n- Mix sentence.')).toBe(true)
    expect(read).toContain('- Fry sentence.')
    expect(read.endsWith('Lovely sentence.')).toBe(true)
  })

  test('<article>s holding most of the page, or one holding a large part of it, are read alone; <main> is read alone whatever is around it', () => {
    const article = `<div>Share this story</div><article><h1>Headline</h1><p>${sentences('Body', 60)}</p></article><div>${sentences('Related', 5)}</div>`
    expect(htmlToText(article, 100_000).text).toBe(`Headline\n\n${sentences('Body', 60)}`)
    // QA: one story in an <article> beside a cookie banner, a "most read" list and a footer in
    // <div>s held half the page's text, under three quarters, so the whole page came back.
    const story = `<div class="cookie-banner"><p>${sentences('Cookie', 14)}</p></div><article><h1>Storm closes the harbour</h1><p>${sentences('Story', 30)}</p></article>` +
      `<div class="most-read"><h2>Most read</h2><ol>${['One', 'Two', 'Three'].map(word => `<li>${sentences(word, 3)}</li>`).join('')}</ol></div><div class="site-footer">${sentences('Footer', 6)}</div>`
    expect(htmlToText(story, 100_000).text).toBe(`Storm closes the harbour\n\n${sentences('Story', 30)}`)
    const main = `<div>${sentences('Outside', 40)}</div><main><p>${sentences('Main', 20)}</p><article>Comment</article></main>`
    expect(htmlToText(main, 100_000).text).toBe(`${sentences('Main', 20)}\n\nComment`)
  })
})

describe('htmlToText: lists', () => {
  test('a line of the page that is only "-" is kept; an empty list item leaves no bullet and no line', () => {
    // QA: every line that was only "-" was deleted (a rule meant for the walk's own empty bullets).
    expect(htmlToText('<table><tr><td>Draws</td><td>-</td></tr></table><p>Before</p><p>-</p><p>after<br>-<br>end</p>', 1000).text)
      .toBe('Draws\t-\n\nBefore\n\n-\n\nafter\n-\nend')
    expect(htmlToText('<p>-</p><ul><li> </li><li><p> </p><br></li><li>-</li></ul>', 1000).text).toBe('-\n\n- -')
    // Review: an empty item left a blank line inside its list.
    expect(htmlToText('<ul><li>a</li><li></li><li> </li><li><p></p></li><li>b</li></ul><ol><li>c</li><li><br></li><li>d</li></ol>', 1000).text).toBe('- a\n- b\n\n- c\n- d')
  })
})

describe('htmlToText: what the page shows', () => {
  test('<noscript> content is read: the fetcher runs no scripts, so it is what the page shows', () => {
    // QA: <noscript> was skipped, so a page drawn by scripts with a <noscript> version came back empty.
    const page = '<head><title>App</title><noscript><style>.js{display:none}</style></noscript></head><body><div id="root"></div>' +
      '<noscript><h1>Opening hours</h1><p>Mon–Fri 9–17.</p><p hidden>Not shown.</p><iframe src="https://tags.example/ns"></iframe></noscript><script>render()</script></body>'
    expect(htmlToText(page, 1000)).toEqual({ title: 'App', text: 'Opening hours\n\nMon–Fri 9–17.', modified: null })
  })
})

describe('htmlToText: block elements', () => {
  test('<form>, <center>, <search>, <hgroup> and <menu> start lines of their own; an open <dialog> is read, a closed one is not', () => {
    // QA: <form> and <center> were inline ("SearchQueryResults"), and every <dialog> was skipped, an open one too.
    const page = 'Search<form action="/s"><label>Query</label></form>Results<center>Centered</center>after' +
      '<search>Find</search><hgroup><h1>Title</h1><p>Subtitle</p></hgroup><menu><li>Copy</li></menu>' +
      '<dialog open><p>Cookie settings saved.</p></dialog><dialog><p>Are you sure?</p></dialog><p>End</p>'
    expect(htmlToText(page, 1000).text).toBe('Search\nQuery\nResults\nCentered\nafter\nFind\n\nTitle\n\nSubtitle\n\n- Copy\n\nCookie settings saved.\n\nEnd')
  })
})
