import { describe, expect, test } from 'bun:test'
import type { ModelRoute, PrivacyLevel } from '../../../src/catalog/types'
import { ApiError } from '../../../src/http/errors'
import { resolveFusionRoutes, type RouteResolver } from '../../../src/fusion/privacy'

// The level rules of Fusion (spec §4.5, issue 9 point 4), as a table. Today's catalog refuses
// Confidential and Encrypted models at boot, so this runs against a catalog stand-in that
// offers every level; the route's own tests cover the levels that exist.

function route(id: string, level: PrivacyLevel): ModelRoute {
  return {
    id, modelId: id.split(':')[0]!, level, backends: [], routing: 'ordered', price: { inputPerMillion: 0n, outputPerMillion: 0n },
    capabilities: { tools: false, reasoning: false, vision: false, supportsWebFetch: false, supportsWebSearch: false, fileInput: false },
    contextLength: 1000, maxOutputTokens: 100,
  }
}

const ROUTES = new Map<string, ModelRoute>(
  [
    route('anon-1', 'anonymous'), route('anon-2', 'anonymous'), route('priv-1', 'private'), route('priv-2', 'private'),
    route('tee-1:confidential', 'confidential'), route('tee-2:confidential', 'confidential'), route('tee-3:confidential', 'confidential'),
    route('enc-1:encrypted', 'encrypted'), route('llama', 'private'), route('llama:confidential', 'confidential'), route('llama:encrypted', 'encrypted'),
  ].map(entry => [entry.id, entry]),
)
const catalog: RouteResolver = {
  resolve(id) {
    const found = ROUTES.get(id)
    if (!found) throw new ApiError('invalid_request', `model "${id}" is not in the catalog`, 'model')
    return found
  },
}

type Row = [participants: string[], judge: string | undefined, outcome: string]
// outcome: "judge <id>" when accepted (with the judge actually used), else "400 <param>".
const TABLE: Row[] = [
  [['anon-1', 'anon-2'], undefined, 'judge llama'],
  [['anon-1', 'priv-1'], undefined, 'judge llama'],
  [['priv-1', 'priv-2', 'anon-1'], undefined, 'judge llama'],
  [['priv-1', 'priv-2'], undefined, 'judge llama'],
  [['anon-1', 'anon-2'], 'anon-1', 'judge anon-1'],
  [['anon-1', 'priv-1'], 'anon-2', 'judge anon-2'],
  // All-private participants never go to an anonymous judge.
  [['priv-1', 'priv-2'], 'anon-1', '400 judge'],
  // A judge above the participants' level is fine.
  [['anon-1', 'anon-2'], 'tee-1:confidential', 'judge tee-1:confidential'],
  // Confidential only with Confidential; then the judge is Confidential too.
  [['tee-1:confidential', 'tee-2:confidential'], undefined, 'judge llama:confidential'],
  [['tee-1:confidential', 'tee-2:confidential', 'tee-3:confidential'], 'tee-3:confidential', 'judge tee-3:confidential'],
  [['tee-1:confidential', 'tee-2:confidential'], 'priv-1', '400 judge'],
  [['tee-1:confidential', 'tee-2:confidential'], 'llama', '400 judge'],
  [['tee-1:confidential', 'anon-1'], undefined, '400 models'],
  [['priv-1', 'tee-1:confidential'], 'tee-2:confidential', '400 models'],
  // Encrypted: never a participant, never the judge.
  [['enc-1:encrypted', 'anon-1'], undefined, '400 models.0'],
  [['tee-1:confidential', 'llama:encrypted'], undefined, '400 models.1'],
  [['anon-1', 'anon-2'], 'llama:encrypted', '400 judge'],
  // Distinct logical models: a level suffix does not make a model another one.
  [['llama', 'llama:confidential'], undefined, '400 models.1'],
  [['anon-1', 'anon-1'], undefined, '400 models.1'],
  [['anon-1', 'nope'], undefined, '400 models.1'],
  [['anon-1'], undefined, '400 models'],
  [['anon-1', 'anon-2', 'priv-1', 'priv-2'], undefined, '400 models'],
  [['anon-1', 'anon-2'], 'nope', '400 judge'],
]

describe('Fusion level mixing', () => {
  for (const [participants, judge, outcome] of TABLE) {
    test(`${participants.join(' + ')}${judge ? ` judged by ${judge}` : ''} → ${outcome}`, () => {
      let actual: string
      try {
        const routes = resolveFusionRoutes(catalog, participants, judge, 'llama')
        actual = `judge ${routes.judge.id}`
        expect(routes.participants.map(entry => entry.id)).toEqual(participants)
        expect(routes.confidential).toBe(participants.every(id => id.endsWith(':confidential')))
      } catch (error) {
        if (!(error instanceof ApiError)) throw error
        expect(error.status).toBe(400)
        expect(error.message.length).toBeGreaterThan(20)
        actual = `400 ${error.param}`
      }
      expect(actual).toBe(outcome)
    })
  }

  test('no configured judge and none named: 400 asking for one', () => {
    expect(() => resolveFusionRoutes(catalog, ['anon-1', 'anon-2'], undefined, undefined)).toThrow(/name one with "judge"/)
  })

  test('a default judge without a Confidential level cannot judge Confidential participants', () => {
    expect(() => resolveFusionRoutes(catalog, ['tee-1:confidential', 'tee-2:confidential'], undefined, 'priv-1')).toThrow(/name a Confidential judge/)
  })
})
