/**
 * A map keyed by a (string, number) pair — an owner id and a period start, say — that builds no
 * key string per lookup: two Map reads. For lookups that run per request or per settlement.
 */
export class PairMap<T> {
  private readonly byFirst = new Map<string, Map<number, T>>()

  get(first: string, second: number): T | undefined {
    return this.byFirst.get(first)?.get(second)
  }

  set(first: string, second: number, value: T): void {
    let inner = this.byFirst.get(first)
    if (inner === undefined) this.byFirst.set(first, (inner = new Map()))
    inner.set(second, value)
  }

  delete(first: string, second: number): void {
    const inner = this.byFirst.get(first)
    if (inner === undefined) return
    inner.delete(second)
    if (inner.size === 0) this.byFirst.delete(first)
  }

  /** Every value, grouped by the first key. */
  values(): T[] {
    const values: T[] = []
    for (const inner of this.byFirst.values()) for (const value of inner.values()) values.push(value)
    return values
  }
}
