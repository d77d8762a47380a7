import { AnthropicProvider } from '../../src/providers/anthropic/provider'
import { FakeUpstream } from '../support/fake-upstream'
import { anthropicWire } from './anthropic-wire'
import { runConformance } from './conformance'
import { providerConfig } from './fixtures'

const KEY = 'sk-ant-conformance-0123456789abcdef'
const MODEL = 'claude-test-model' // as in anthropic-wire.ts

runConformance('anthropic', async timeouts => {
  const upstream = await FakeUpstream.start()
  const provider = new AnthropicProvider(providerConfig({ type: 'anthropic', id: 'claude', baseUrl: `${upstream.url}/v1`, apiKey: KEY, ...timeouts }))
  return { provider, upstream, model: MODEL, apiKey: KEY, wire: anthropicWire, close: () => upstream.close() }
})
