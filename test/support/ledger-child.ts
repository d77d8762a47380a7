// A gateway process stand-in for the multi-process ledger tests (test/ledger/processes.test.ts):
// it opens the shared `file:` database through the real deps (NativeExecutor writer, its own
// SVC_INSTANCE_ID), migrates, starts the sweeper, and then, by mode:
//
//   hammer   LEDGER_KEYS (comma-separated secrets), LEDGER_WORKERS per key, LEDGER_ESTIMATE and
//            LEDGER_ACTUAL nanos: each worker admits and settles until the ledger refuses it,
//            then the process closes its deps (returning its leases) and prints one JSON line
//            of what it charged and why it was refused.
//   hang     admits LEDGER_ESTIMATE once with the first key (taking a lease), prints
//            "ADMITTED <json>", and waits to be killed.
//
// With LEDGER_WAIT_FOR_GO=1 it prints READY once its keys verify and starts only when a line
// arrives on stdin, so that several processes start hammering together. Configuration comes
// from the environment the parent sets: DATABASE_URL, SVC_INSTANCE_ID, SVC_CONFIG (loadConfig
// reads them).
import { migrateDatabase } from '../../src/db/client'
import { loadConfig } from '../../src/config/load'
import { createDeps } from '../../src/deps'
import type { Principal } from '../../src/keys/principal'
import { silentLogger } from '../../src/observability/logger'

const mode = process.argv[2]
const env = process.env
const deps = await createDeps(loadConfig(env), { logger: silentLogger })
await migrateDatabase(deps.database)
await deps.sweeper.start()

const secrets = (env.LEDGER_KEYS ?? '').split(',').filter(Boolean)
const principals: Principal[] = []
for (const secret of secrets) {
  const result = await deps.keys.verify(secret)
  if (!result.ok) throw new Error(`key does not verify: ${result.reason}`)
  principals.push(result.principal)
}
const estimate = BigInt(env.LEDGER_ESTIMATE ?? '1000000')

// Start together with the other processes: say READY, then wait for a line on stdin.
if (env.LEDGER_WAIT_FOR_GO === '1') {
  console.log('READY')
  const reader = Bun.stdin.stream().getReader()
  await reader.read()
  reader.releaseLock()
}

if (mode === 'hang') {
  const admitted = await deps.ledger.admit({ principal: principals[0]!, purpose: 'chat', estimate })
  if (!admitted.ok) throw new Error(`not admitted: ${admitted.error.message}`)
  console.log(`ADMITTED ${JSON.stringify({ instance: deps.identity.instanceId, boot: deps.identity.bootId })}`)
  setInterval(() => {}, 60_000) // keep running until SIGKILL
} else if (mode === 'hammer') {
  const actual = BigInt(env.LEDGER_ACTUAL ?? String(estimate))
  const workers = Number(env.LEDGER_WORKERS ?? '4')
  const charged = new Map<string, bigint>()
  const refusals: Record<string, number> = {}
  let calls = 0
  const worker = async (keyIndex: number) => {
    const principal = principals[keyIndex]!
    for (;;) {
      const result = await deps.ledger.admit({ principal, purpose: 'chat', estimate })
      if (!result.ok) {
        refusals[result.error.code] = (refusals[result.error.code] ?? 0) + 1
        return
      }
      await deps.ledger.settle(result.reservation, actual)
      calls += 1
      charged.set(principal.keyId, (charged.get(principal.keyId) ?? 0n) + actual)
    }
  }
  await Promise.all(principals.flatMap((_, index) => Array.from({ length: workers }, () => worker(index))))
  await deps.close()
  console.log(JSON.stringify({ instance: deps.identity.instanceId, calls, refusals, charged: Object.fromEntries([...charged].map(([key, value]) => [key, String(value)])) }))
  process.exit(0)
} else {
  throw new Error(`unknown mode ${mode}`)
}
