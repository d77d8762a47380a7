import type { Clock } from '../../src/lib/clock'

/** A clock tests move by hand. Starts at a fixed instant so expiries are reproducible. */
export class FakeClock implements Clock {
  constructor(private nowMs = Date.UTC(2026, 0, 15, 12, 0, 0)) {}
  now(): number {
    return this.nowMs
  }
  advance(ms: number): void {
    this.nowMs += ms
  }
  set(ms: number): void {
    this.nowMs = ms
  }
}
