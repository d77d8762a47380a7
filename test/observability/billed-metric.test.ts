import { expect, test } from 'bun:test'
import { buildTestApp } from '../support/harness'

// README: svc_billed_nanos_total is the USD nanos charged. Before, only chat and Fusion calls
// counted it: document-parse units (and web fetch/search) settled through the same metering
// but never reached it, so the metric did not add up to the ledger. Now every settlement counts
// it once, where it settles (MeteredCall), by model and ledger purpose.

/** The metric's series as `model|purpose` → nanos. */
function billedSeries(text: string): Map<string, number> {
  const series = new Map<string, number>()
  for (const line of text.split('\n')) {
    const match = /^svc_billed_nanos_total\{model="([^"]*)",purpose="([^"]*)"\} (\d+)$/.exec(line)
    if (match) series.set(`${match[1]}|${match[2]}`, Number(match[3]))
  }
  return series
}

test('every settled charge is counted once: document parsing, a chat with an attachment, Fusion (a repeated Idempotency-Key charges nothing)', async () => {
  const t = await buildTestApp()
  try {
    const org = await t.createOrg('acme')
    const file = new FormData()
    file.append('file', new Blob(['hello world']), 'a.txt')
    expect((await t.request('POST', '/api/v1/attachments/parse', { key: org.adminKey, body: file })).status).toBe(200)
    const attachment = { type: 'file', file: { filename: 'a.txt', file_data: `data:text/plain;base64,${btoa('some text here')}` } }
    const chat = await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body: { model: 'demo-anonymous', messages: [{ role: 'user', content: [attachment, { type: 'text', text: 'hi' }] }] } })
    expect(chat.status).toBe(200)
    const fusion = { models: ['demo-anonymous', 'demo-alt'], messages: [{ role: 'user', content: 'hi' }] }
    const headers = { 'idempotency-key': crypto.randomUUID() }
    for (let attempt = 0; attempt < 2; attempt++) expect((await t.request('POST', '/api/v1/chat/fusion', { key: org.adminKey, body: fusion, headers })).status).toBe(200)

    const ledger = await t.deps.database.client.execute("SELECT purpose, sum(amount_nanos) AS nanos FROM ledger_entries WHERE kind = 'settle' GROUP BY purpose")
    const booked = new Map(ledger.rows.map(row => [String(row.purpose), Number(row.nanos)]))
    const series = billedSeries(t.deps.metrics.registry.render())
    const byPurpose = new Map<string, number>()
    for (const [labels, nanos] of series) {
      const purpose = labels.split('|')[1]!
      byPurpose.set(purpose, (byPurpose.get(purpose) ?? 0) + nanos)
    }
    expect([...booked.keys()].sort()).toEqual(['chat', 'doc_parse', 'fusion'])
    expect(Object.fromEntries(byPurpose)).toEqual(Object.fromEntries(booked))
    // Two files parsed (the route's and the chat's attachment), labelled with no model; the chat
    // counted once (not again where its line is filled).
    expect(series.get('|doc_parse')).toBe(booked.get('doc_parse')!)
    expect(series.get('demo-anonymous|chat')).toBe(booked.get('chat')!)
  } finally {
    await t.close()
  }
})
