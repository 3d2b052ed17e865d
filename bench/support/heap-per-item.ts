/**
 * Preload for a benchmark: samples every allocation of the run (objects already collected
 * included) with V8's sampling heap profiler, and at exit prints the bytes allocated per item by
 * twophase's own code (functions in src/ and adapters/; the benchmark's loop, the handler's JSON
 * parse when inlined elsewhere, and Node's internals are left out), with the largest functions.
 * Allocation counts, unlike CPU time, hardly move with the machine's load, so two versions of the
 * code can be compared on a shared machine. Not a test.
 *
 *   BENCH_ITEMS=120000 BENCH_ONLY=twophase node -r ts-node/register/transpile-only \
 *     -r ./bench/support/heap-per-item.ts bench/kafka/adapter.ts 60000 2
 *
 * `BENCH_ITEMS`: the items the measured side handles in the whole run (records × runs).
 */
import { Session } from 'node:inspector';

interface ProfileNode {
  readonly callFrame: { readonly functionName: string; readonly url: string };
  readonly selfSize: number;
  readonly children: readonly ProfileNode[];
}

const items = Number(process.env.BENCH_ITEMS);
if (!Number.isFinite(items) || items <= 0) throw new Error('heap-per-item: set BENCH_ITEMS to the items the run handles');

const session = new Session();
session.connect();
session.post('HeapProfiler.enable');
// 256 bytes between samples on average; the flags keep objects that died young in the profile.
session.post('HeapProfiler.startSampling', { samplingInterval: 256, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });

let reported = false;
process.on('beforeExit', () => {
  if (reported) return;
  reported = true;
  session.post('HeapProfiler.stopSampling', (error, result) => {
    if (error) throw error;
    const byFunction = new Map<string, number>();
    let total = 0;
    const walk = (node: ProfileNode): void => {
      const { url, functionName } = node.callFrame;
      if (/\/(src|adapters)\//.test(url)) {
        total += node.selfSize;
        const name = `${functionName || '(anonymous)'} ${url.split('/').slice(-2).join('/')}`;
        byFunction.set(name, (byFunction.get(name) ?? 0) + node.selfSize);
      }
      for (const child of node.children) walk(child);
    };
    walk((result as unknown as { profile: { head: ProfileNode } }).profile.head);
    console.log(`twophase code allocated ${(total / items).toFixed(0)} bytes per item`);
    for (const [name, bytes] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, 12)) console.log(`${(bytes / items).toFixed(0).padStart(7)}  ${name}`);
  });
});
