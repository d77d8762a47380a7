// Preloaded into a gateway child (`bun --preload`, test/ops/heap-ram.test.ts): the host reads as
// 64 GiB of RAM, so `svc serve` re-executes itself (src/lib/heap-ram.ts) on any test machine.
// Through require: an ESM namespace cannot be patched, but its named imports follow this object.
require('node:os').totalmem = () => 64 * 1024 ** 3
