import { customType } from 'drizzle-orm/sqlite-core'

// The client runs with intMode 'bigint', so every INTEGER arrives as a bigint. Drizzle's
// built-in integer modes (timestamp, boolean) crash on bigints, hence these small columns.

/** USD nanos: INTEGER ↔ bigint, exact across the whole int64 range. */
export const nanos = customType<{ data: bigint; driverData: bigint }>({
  dataType: () => 'integer',
  fromDriver: value => BigInt(value as bigint | number),
  toDriver: value => value,
})

/** Epoch milliseconds: INTEGER ↔ number (safe until year 287396). */
export const epochMs = customType<{ data: number; driverData: bigint | number }>({
  dataType: () => 'integer',
  fromDriver: value => Number(value),
  toDriver: value => value,
})

/** A small count: INTEGER ↔ number. */
export const count = customType<{ data: number; driverData: bigint | number }>({
  dataType: () => 'integer',
  fromDriver: value => Number(value),
  toDriver: value => value,
})

/** Boolean: INTEGER 0/1 ↔ boolean. */
export const bool = customType<{ data: boolean; driverData: bigint | number }>({
  dataType: () => 'integer',
  fromDriver: value => Number(value) === 1,
  toDriver: value => (value ? 1 : 0),
})
