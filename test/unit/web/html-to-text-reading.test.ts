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

  test('<article>s holding most of the page are read alone; <main> is read alone whatever is around it', () => {
    const article = `<div>Share this story</div><article><h1>Headline</h1><p>${sentences('Body', 60)}</p></article><div>${sentences('Related', 5)}</div>`
    expect(htmlToText(article, 100_000).text).toBe(`Headline\n\n${sentences('Body', 60)}`)
    const main = `<div>${sentences('Outside', 40)}</div><main><p>${sentences('Main', 20)}</p><article>Comment</article></main>`
    expect(htmlToText(main, 100_000).text).toBe(`${sentences('Main', 20)}\n\nComment`)
  })
})
