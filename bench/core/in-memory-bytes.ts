/**
 * Heap bytes per key held by InMemoryClaimer: claims and commits N keys shaped like a namespaced
 * UUID key (`payments:<uuid>`, 45 characters) with no result, and divides the heap growth (after
 * a full GC, keys and receipts of the loop dropped) by N. The number documented for `maxKeys`.
 *
 *   node --expose-gc -r ts-node/register/transpile-only bench/core/in-memory-bytes.ts [keys=200000]
 */
import { randomUUID } from 'node:crypto';
import { InMemoryClaimer } from '../../src';

const N = Number(process.argv[2] ?? 200_000);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

async function main(): Promise<void> {
  // Flat strings (decoded from bytes, as a broker header is): a concatenated string would be
  // flattened by the claimer's Map and shrink the heap meanwhile.
  const keys = Array.from({ length: N }, () => Buffer.from(`payments:${randomUUID()}`).toString('latin1'));
  const keyBytes = keys.reduce((n, k) => n + k.length, 0) / N;
  gc!();
  const before = process.memoryUsage().heapUsed;
  const claimer = new InMemoryClaimer();
  const options = { leaseTtlMs: 30_000, doneTtlMs: 7 * 24 * 3600_000 };
  for (const key of keys) {
    const claim = await claimer.claim(key, options);
    if (claim.state === 'acquired') await claim.receipt.commit();
  }
  gc!();
  const after = process.memoryUsage().heapUsed;
  // The key strings existed before the claimer and are counted in `before`; the claimer holds them too.
  console.log(`keys ${N} (key ${keyBytes.toFixed(0)} characters), records held ${claimer.size}`);
  console.log(`heap per key held by the claimer: ${((after - before) / N).toFixed(0)} bytes (excluding the key string itself)`);
  console.log(`heap per key including its key string (one-byte characters): ~${((after - before) / N + 16 + keyBytes).toFixed(0)} bytes`);
}

void main();
