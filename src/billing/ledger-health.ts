import { ApiError } from '../http/errors'
import type { Clock } from '../lib/clock'
import type { Logger } from '../observability/logger'

// A successful ledger write younger than this proves the database writable for admission.
const FRESH_MS = 1000
// While the database is down, probe it this often; billed calls are refused meanwhile.
const PROBE_EVERY_MS = 1000

/**
 * Whether the ledger's database takes writes (ARCHITECTURE.md §7.2, issue 12 point 7). A billed
 * call is admitted only when it does, so that an outage (database unreachable, or read-only)
 * means 503 `unavailable` before any upstream work, never inference that cannot be billed.
 *
 * Cheap on the hot path: under traffic every committed batch proves the database, so admission
 * checks one timestamp. Only an instance idle for FRESH_MS (1 s) pays one probe write (coalesced)
 * before its next billed call. A failed write marks the database down; while down, calls are
 * refused at once and a timer probes every PROBE_EVERY_MS, so service resumes by itself.
 */
export class LedgerHealth {
  private lastOkMs = Number.NEGATIVE_INFINITY
  private down = false
  private probing: Promise<boolean> | null = null
  private timer: ReturnType<typeof setInterval> | undefined
  /** The probe write (a heartbeat through the ledger writer); set by deps. */
  probe: () => Promise<unknown> = async () => {}

  constructor(
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** The database is known down: refuse without waiting. */
  get unavailable(): boolean {
    return this.down
  }

  /** A recent write succeeded: admit without asking the database. */
  get fresh(): boolean {
    return !this.down && this.clock.now() - this.lastOkMs < FRESH_MS
  }

  /** Resolves true when the database takes a write now (one probe shared by concurrent callers). */
  check(): Promise<boolean> {
    if (this.down) return Promise.resolve(false)
    this.probing ??= this.runProbe().finally(() => {
      this.probing = null
    })
    return this.probing
  }

  /** A ledger batch committed. */
  succeeded(): void {
    this.lastOkMs = this.clock.now()
    if (!this.down) return
    this.down = false
    clearInterval(this.timer)
    this.timer = undefined
    this.logger.info('ledger database available again')
  }

  /** A ledger write failed; errors of the data itself (constraints) say nothing about the database. */
  failed(error: unknown): void {
    if (isDataError(error) || this.down) return
    this.down = true
    this.logger.error('ledger database unavailable: refusing billed calls until it recovers', { error: String(error) })
    this.timer = setInterval(() => void this.runProbe(), PROBE_EVERY_MS)
    this.timer.unref?.()
  }

  /** Stops the probe timer (shutdown). */
  close(): void {
    clearInterval(this.timer)
  }

  /** The refusal billed routes give while the database is down. */
  static refusal(): ApiError {
    return new ApiError('unavailable', 'the ledger database is unavailable; nothing was charged, retry shortly')
  }

  private async runProbe(): Promise<boolean> {
    try {
      await this.probe()
      this.succeeded()
      return true
    } catch (error) {
      this.failed(error)
      return false
    }
  }
}

/** A constraint or type error: the op's fault, not the database's availability. */
export function isDataError(error: unknown): boolean {
  const text = `${(error as { code?: unknown })?.code ?? ''} ${String(error)}`
  return /CONSTRAINT|datatype mismatch|RangeError/i.test(text)
}
