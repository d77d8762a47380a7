// `svc serve` for test/ops/boot-signal.test.ts: the real serve, in its own process, which sends
// itself SIGTERM inside the boot step SIGNAL_AT_STEP names and waits for the signal to be
// handled before the step's work goes on. The signal so lands in the middle of that step every
// time, with no sleep to aim it. Configuration comes from the environment, as for `svc serve`.
import { loadConfig } from '../../src/config/load'
import { serve, type BootStep } from '../../src/main'

const signalAt = process.env.SIGNAL_AT_STEP as BootStep
await serve(loadConfig(process.env), {
  async onBootStep(step) {
    if (step !== signalAt) return
    // Registered after serve's own listener, so this one runs once the drain has begun.
    const handled = new Promise(resolve => process.once('SIGTERM', resolve))
    process.kill(process.pid, 'SIGTERM')
    await handled
  },
})
