import { describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { duplicateKey } from '../../src/config/duplicate-keys'

// The config file's duplicate-key scan: it finds a key given twice in one mapping, in every form a
// config is written in, and never finds one where there is none.

describe('a key given twice is found, with where', () => {
  test.each([
    ['block mapping', 'a: 1\nb: 2\na: 3\n', { key: 'a', line: 3, column: 1 }],
    ['nested block mapping', 'plans:\n  pro: { fusion: true }\n  basic: {}\n  pro: {}\n', { key: 'pro', line: 4, column: 3 }],
    ['after a deeper mapping closed', 'm:\n  price:\n    in: "1"\n  price: x\n', { key: 'price', line: 4, column: 3 }],
    ['flow mapping', 'models:\n  - { id: m, price: { a: "5" }, price: { a: "0" } }\n', { key: 'price', line: 2, column: 33 }],
    ['nested flow mapping', 'x: { price: { a: "1", a: "2" } }\n', { key: 'a', line: 1, column: 23 }],
    ['flow mapping over lines', 'x: {\n  a: 1,\n  # a comment\n  a: 2\n}\n', { key: 'a', line: 4, column: 3 }],
    ['block mapping in a sequence item', 'models:\n  - id: m\n    level: private\n    id: n\n', { key: 'id', line: 4, column: 5 }],
    ['sequence at the key column', 'providers:\n- id: a\n  id: b\n', { key: 'id', line: 3, column: 3 }],
    ['quoted and plain spellings of one key', 'a: 1\n"a": 2\n', { key: 'a', line: 2, column: 1 }],
    ['single-quoted', "'it''s': 1\n\"it's\": 2\n", { key: "it's", line: 2, column: 1 }],
    ['JSON', '{ "plans": { "basic": {} }, "plans": {} }', { key: 'plans', line: 1, column: 29 }],
    ['compact JSON', '{"a":{"b":1,"b":2}}', { key: 'b', line: 1, column: 13 }],
    ['CRLF line ends', 'a: 1\r\nb: 2\r\na: 3\r\n', { key: 'a', line: 3, column: 1 }],
  ])('%s', (_name, text, expected) => {
    expect(duplicateKey(text)).toEqual(expected)
  })
})

describe('no finding where keys are unique', () => {
  test.each([
    ['the same key in sibling items', 'models:\n  - id: a\n    price: 1\n  - id: b\n    price: 2\n'],
    ['the same key in sibling items, dash at the key column', 'models:\n- id: a\n- id: b\nplans: {}\n'],
    ['the same key at different depths', 'a:\n  a:\n    a: 1\n'],
    ['the same key in sibling flow mappings', 'backends: [{ provider: a, model: m }, { provider: b, model: m }]\n'],
    ['colons and hashes inside values', 'url: "http://a:80/#x"\nb: http://b:81/x#y\nc: \'d: e, f\' # g: h\nd: 1\n'],
    ['braces and commas inside quoted flow values', 'x: { a: "}, a: {", b: \'a: 1, a: 2\' }\n'],
    ['comments that look like keys', '# a: 1\na: 1 # a: 2\n  # a: 3\n'],
    ['a key after a multi-line flow value', 'x: [1,\n  2]\nx2: 3\n'],
    ['a plain scalar continued on the next line', 'description: a long\n  text\nother: 1\n'],
  ])('%s', (_name, text) => {
    expect(duplicateKey(text)).toBeUndefined()
  })

  test('what the scan does not model ends it with no finding (a block scalar, anchors, merge keys, tags, documents)', () => {
    for (const text of ['a: |\n  a: 1\na: 2\n', 'base: &b { x: 1 }\nm:\n  <<: *b\n  x: 2\n', 'a: !!str 1\na: 2\n', '---\na: 1\n---\na: 1\n', 'a:\n\t b: 1\n']) {
      expect(duplicateKey(text)).toBeUndefined()
    }
  })

  // QA: a `---` first line (or a %YAML directive) turned the whole scan off, so a second `pro:`
  // plan with a zero allowance replaced the first.
  test.each([
    ['a leading ---', '---\nplans:\n  pro: { monthly_allowance: "20" }\n  pro: { monthly_allowance: "0" }\n', 4],
    ['%YAML, a comment and ---', '%YAML 1.2\n# prices\n--- # the config\nplans:\n  pro: 1\n  pro: 2\n', 6],
  ])('the prologue holds no keys: %s', (_name, text, line) => {
    expect(duplicateKey(text)).toEqual({ key: 'pro', line, column: 3 })
  })

  test('the embedded default config and every YAML block of the README', () => {
    const root = join(import.meta.dir, '../..')
    expect(duplicateKey(readFileSync(join(root, 'src/config/default.yaml'), 'utf8'))).toBeUndefined()
    const blocks = [...readFileSync(join(root, 'README.md'), 'utf8').matchAll(/```yaml\n([\s\S]*?)```/g)].map(match => match[1]!)
    expect(blocks.length).toBeGreaterThan(3)
    for (const block of blocks) expect(duplicateKey(block)).toBeUndefined()
  })
})
