/**
 * Prometheus text exposition (format 0.0.4), hand-rolled: counters and histograms are plain
 * numbers in maps, updated once per request or stream (never per frame), and rendered only when
 * /metrics is scraped. Gauges are callbacks read at scrape time, which is how other modules
 * (the ledger writer, the extractor pool) expose their state without a dependency on this file
 * beyond `gauge(name, help, read)`.
 */

/** One labelled value of a counter family. */
export interface CounterCell {
  value: number
}

/** One labelled series of a histogram family: cumulative bucket counts, sum and count. */
export interface HistogramCell {
  readonly counts: Float64Array
  sum: number
  count: number
}

type Family =
  | { kind: 'counter'; name: string; help: string; labels: readonly string[]; cells: Map<string, { values: readonly string[]; cell: CounterCell }> }
  | { kind: 'histogram'; name: string; help: string; labels: readonly string[]; buckets: readonly number[]; cells: Map<string, { values: readonly string[]; cell: HistogramCell }> }
  | { kind: 'gauge'; name: string; help: string; type: 'gauge' | 'counter'; read: () => number | ReadonlyArray<readonly [Record<string, string>, number]> }

/** Latency buckets in seconds: sub-millisecond (cached auth, ledger commits) to minutes (long generations). */
export const SECONDS_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300]

/** A labelled counter; `inc(...labelValues)` with values in the declared label order. */
export class Counter {
  private readonly index = new LabelIndex<CounterCell>()

  constructor(private readonly family: Extract<Family, { kind: 'counter' }>) {}

  /** The cell for these label values (cached: hot callers may keep it). */
  cell(...values: string[]): CounterCell {
    return this.cellOf(values)
  }

  inc(amount: number, ...values: string[]): void {
    this.cellOf(values).value += amount
  }

  private cellOf(values: string[]): CounterCell {
    return this.index.find(values) ?? this.index.add(values, addCell(this.family.cells, values, { value: 0 }))
  }
}

/** A labelled histogram with fixed buckets. */
export class Histogram {
  private readonly index = new LabelIndex<HistogramCell>()

  constructor(private readonly family: Extract<Family, { kind: 'histogram' }>) {}

  cell(...values: string[]): HistogramCell {
    return this.cellOf(values)
  }

  observe(value: number, ...values: string[]): void {
    observeInto(this.cellOf(values), this.family.buckets, value)
  }

  private cellOf(values: string[]): HistogramCell {
    return this.index.find(values) ?? this.index.add(values, addCell(this.family.cells, values, { counts: new Float64Array(this.family.buckets.length), sum: 0, count: 0 }))
  }
}

/**
 * Cells by label values, one Map level per label. Joining the values into one key built a new
 * string per update and hashed it whole (~2% of a chat request's CPU for ~7 updates); a label
 * value that is a kept string (a provider id, a route) has its hash cached, and a fresh one (a
 * model name parsed from the body) is hashed once however many families it labels.
 */
class LabelIndex<Cell> {
  private readonly root = new Map<string, unknown>()
  private none: Cell | undefined

  find(values: readonly string[]): Cell | undefined {
    const last = values.length - 1
    if (last < 0) return this.none
    let level = this.root
    for (let index = 0; index < last; index += 1) {
      const next = level.get(values[index]!) as Map<string, unknown> | undefined
      if (next === undefined) return undefined
      level = next
    }
    return level.get(values[last]!) as Cell | undefined
  }

  add(values: readonly string[], cell: Cell): Cell {
    const last = values.length - 1
    if (last < 0) return (this.none = cell)
    let level = this.root
    for (let index = 0; index < last; index += 1) {
      let next = level.get(values[index]!) as Map<string, unknown> | undefined
      if (next === undefined) level.set(values[index]!, (next = new Map()))
      level = next
    }
    level.set(values[last]!, cell)
    return cell
  }
}

/** Registers a new cell with its family, for rendering (the join runs once per series). */
function addCell<Cell>(cells: Map<string, { values: readonly string[]; cell: Cell }>, values: readonly string[], cell: Cell): Cell {
  const key = values.join('\u0000')
  const existing = cells.get(key)
  if (existing !== undefined) return existing.cell
  cells.set(key, { values: [...values], cell })
  return cell
}

function observeInto(cell: HistogramCell, buckets: readonly number[], value: number): void {
  cell.sum += value
  cell.count += 1
  // Buckets hold their own counts; they are made cumulative when rendered.
  for (let index = 0; index < buckets.length; index += 1) {
    if (value <= buckets[index]!) {
      cell.counts[index]! += 1
      return
    }
  }
}

/** A registry of metric families, rendered in registration order. */
export class MetricsRegistry {
  private readonly families = new Map<string, Family>()

  counter(name: string, help: string, labels: readonly string[]): Counter {
    const family = { kind: 'counter' as const, name, help, labels, cells: new Map() }
    this.register(family)
    return new Counter(family)
  }

  histogram(name: string, help: string, labels: readonly string[], buckets: readonly number[] = SECONDS_BUCKETS): Histogram {
    const family = { kind: 'histogram' as const, name, help, labels, buckets, cells: new Map() }
    this.register(family)
    return new Histogram(family)
  }

  /**
   * A value read at scrape time: one number, or labelled series. `type: 'counter'` for a
   * monotonic total kept elsewhere (the writer's batch count). Registering a name again
   * replaces the earlier reader (a pool rebuilt after a restart of its workers, say).
   */
  gauge(name: string, help: string, read: () => number | ReadonlyArray<readonly [Record<string, string>, number]>, type: 'gauge' | 'counter' = 'gauge'): void {
    if (!/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(name)) throw new Error(`invalid metric name ${name}`)
    this.families.set(name, { kind: 'gauge', name, help, type, read })
  }

  /** The Prometheus text format of every family. A failing gauge reader is skipped, not fatal. */
  render(): string {
    const lines: string[] = []
    for (const family of this.families.values()) {
      lines.push(`# HELP ${family.name} ${family.help}`)
      if (family.kind === 'counter') {
        lines.push(`# TYPE ${family.name} counter`)
        for (const { values, cell } of family.cells.values()) lines.push(`${family.name}${labelText(family.labels, values)} ${cell.value}`)
      } else if (family.kind === 'histogram') {
        lines.push(`# TYPE ${family.name} histogram`)
        for (const { values, cell } of family.cells.values()) {
          let cumulative = 0
          family.buckets.forEach((bound, index) => {
            cumulative += cell.counts[index]!
            lines.push(`${family.name}_bucket${labelText([...family.labels, 'le'], [...values, String(bound)])} ${cumulative}`)
          })
          lines.push(`${family.name}_bucket${labelText([...family.labels, 'le'], [...values, '+Inf'])} ${cell.count}`)
          lines.push(`${family.name}_sum${labelText(family.labels, values)} ${cell.sum}`)
          lines.push(`${family.name}_count${labelText(family.labels, values)} ${cell.count}`)
        }
      } else {
        lines.push(`# TYPE ${family.name} ${family.type}`)
        let value: ReturnType<typeof family.read>
        try {
          value = family.read()
        } catch {
          continue
        }
        if (typeof value === 'number') lines.push(`${family.name} ${value}`)
        else for (const [labels, number] of value) lines.push(`${family.name}${labelText(Object.keys(labels), Object.values(labels))} ${number}`)
      }
    }
    return `${lines.join('\n')}\n`
  }

  private register(family: Family): void {
    if (this.families.has(family.name)) throw new Error(`metric ${family.name} registered twice`)
    this.families.set(family.name, family)
  }
}

function labelText(names: readonly string[], values: readonly string[]): string {
  if (names.length === 0) return ''
  return `{${names.map((name, index) => `${name}="${escapeLabel(values[index] ?? '')}"`).join(',')}}`
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')
}
