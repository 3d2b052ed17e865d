/**
 * The floors under the Redis claimer's per-key cost on this machine, measured on a private
 * redis-server (so its counters hold only this benchmark's work). Not a test; nothing fails.
 *
 *   call      one `EVALSHA` of a script that does nothing (`return 0`) with 1 key and N extra
 *             arguments, 64 calls in flight: this process's CPU per call and per argument (what
 *             ioredis spends encoding a call and parsing its reply), and the server's CPU per
 *             call (reading, parsing, running an empty script, replying)
 *   lua       one `EVALSHA` per 100 keys of scripts that do, per key, only what a claim and a
 *             commit cannot avoid: `SET NX PX` of a new key (claim), then `GET` + `SET PX` of it
 *             (commit): the server's command time per key of the Lua work alone
 *   plain     the same writes as plain commands, pipelined (`SET NX PX`, then `GET` + `SET PX`)
 *   rtt       one `PING` at a time: the round trip one call waits for at 1 in flight
 *
 *   npx ts-node --transpile-only bench/redis/floor.ts [--runs 5] [--calls 20000] [--out file.json]
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Redis from 'ioredis';
import { RedisServerProcess } from '../../test/integration/redis/support/redis-process';
import { sampleRedisServer, serverDelta } from '../support/redis-server-cost';

const get = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
};
const RUNS = Number(get('runs', '5'));
const CALLS = Number(get('calls', '20000'));
const OUT = get('out', join(__dirname, '..', 'results', 'redis-floor.json'));
const IN_FLIGHT = 64;
const BATCH = 100;

const EMPTY = 'return 0';
const CLAIM_FLOOR = "for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[1], 'PX', 30000, 'NX') end return 0";
const COMMIT_FLOOR = "for i = 1, #KEYS do local v = redis.call('GET', KEYS[i]) redis.call('SET', KEYS[i], ARGV[1], 'PX', 600000) end return 0";

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const round2 = (x: number) => Math.round(x * 100) / 100;

async function pool(total: number, inFlight: number, fn: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < total; i = next++) await fn(i);
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
}

/** Runs `body`, returning this process's CPU µs and the server's CPU and command µs over it. */
async function cost(redis: Redis, body: () => Promise<void>): Promise<{ nodeUs: number; serverCpuUs: number; serverCommandUs: number; wallMs: number }> {
  const before = await sampleRedisServer(redis);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await body();
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const server = serverDelta(before, await sampleRedisServer(redis));
  return { nodeUs: cpu.user + cpu.system, serverCpuUs: server.cpuUs, serverCommandUs: server.commandUs, wallMs };
}

async function main(): Promise<void> {
  const server = await RedisServerProcess.start();
  const redis = new Redis({ host: '127.0.0.1', port: server.port });
  try {
    const sha = {
      empty: (await redis.script('LOAD', EMPTY)) as string,
      claim: (await redis.script('LOAD', CLAIM_FLOOR)) as string,
      commit: (await redis.script('LOAD', COMMIT_FLOOR)) as string,
    };
    const argCounts = [0, 10, 100];
    const callSamples = new Map<number, Array<{ nodeUs: number; serverCpuUs: number }>>(argCounts.map((n) => [n, []]));
    const luaSamples: Array<{ claim: number; commit: number; cpu: number }> = [];
    const plainSamples: Array<{ cmd: number; cpu: number }> = [];
    const rttSamples: number[] = [];
    const keysPerRun = CALLS;
    for (let run = -1; run < RUNS; run++) {
      const warm = run < 0;
      for (const n of argCounts) {
        const extra = Array.from({ length: n }, (_, i) => `arg-${i}-0123456789`);
        const calls = warm ? 1000 : CALLS;
        const c = await cost(redis, () => pool(calls, IN_FLIGHT, () => redis.evalsha(sha.empty, 1, 'floor-key', ...extra)));
        if (!warm) callSamples.get(n)!.push({ nodeUs: c.nodeUs / calls, serverCpuUs: c.serverCpuUs / calls });
      }
      const keys = Array.from({ length: warm ? 1000 : keysPerRun }, (_, i) => `floor:${run}:{k${i}}`);
      const batches: string[][] = [];
      for (let b = 0; b < keys.length; b += BATCH) batches.push(keys.slice(b, b + BATCH));
      const claim = await cost(redis, () => pool(batches.length, 2, (i) => redis.evalsha(sha.claim, batches[i]!.length, ...batches[i]!, 'L|1764000000000000|owner-token-0123|1|1764000000000||')));
      const commit = await cost(redis, () => pool(batches.length, 2, (i) => redis.evalsha(sha.commit, batches[i]!.length, ...batches[i]!, 'D|1764000000000000||1|||')));
      if (!warm) luaSamples.push({ claim: claim.serverCommandUs / keys.length, commit: commit.serverCommandUs / keys.length, cpu: (claim.serverCpuUs + commit.serverCpuUs) / keys.length });
      await redis.unlink(...keys);
      const plain = await cost(redis, async () => {
        for (const batch of batches) {
          const claims = redis.pipeline();
          for (const k of batch) claims.set(k, 'L|1764000000000000|owner-token-0123|1|1764000000000||', 'PX', 30000, 'NX');
          await claims.exec();
          const commits = redis.pipeline();
          for (const k of batch) {
            commits.get(k);
            commits.set(k, 'D|1764000000000000||1|||', 'PX', 600000);
          }
          await commits.exec();
        }
      });
      if (!warm) plainSamples.push({ cmd: plain.serverCommandUs / keys.length, cpu: plain.serverCpuUs / keys.length });
      await redis.unlink(...keys);
      const pings = warm ? 200 : 2000;
      const rtt = await cost(redis, async () => {
        for (let i = 0; i < pings; i++) await redis.ping();
      });
      if (!warm) rttSamples.push((rtt.wallMs * 1000) / pings);
    }
    const call = Object.fromEntries(
      argCounts.map((n) => [n, { nodeUsPerCall: round2(median(callSamples.get(n)!.map((s) => s.nodeUs))), serverCpuUsPerCall: round2(median(callSamples.get(n)!.map((s) => s.serverCpuUs))) }]),
    );
    const perArgNodeUs = round2((call[100]!.nodeUsPerCall - call[0]!.nodeUsPerCall) / 100);
    const perArgServerUs = round2((call[100]!.serverCpuUsPerCall - call[0]!.serverCpuUsPerCall) / 100);
    const result = {
      benchmark: 'bench/redis/floor.ts',
      date: new Date().toISOString(),
      parameters: { runs: RUNS, callsPerRun: CALLS, inFlight: IN_FLIGHT, luaBatchKeys: BATCH },
      evalshaEmptyScript: call,
      perArgument: { nodeUs: perArgNodeUs, serverCpuUs: perArgServerUs },
      luaPerKey: {
        claimSetNxCommandUs: round2(median(luaSamples.map((s) => s.claim))),
        commitGetSetCommandUs: round2(median(luaSamples.map((s) => s.commit))),
        claimPlusCommitServerCpuUs: round2(median(luaSamples.map((s) => s.cpu))),
      },
      plainPipelinedPerKey: { commandUs: round2(median(plainSamples.map((s) => s.cmd))), serverCpuUs: round2(median(plainSamples.map((s) => s.cpu))) },
      pingRoundTripUs: round2(median(rttSamples)),
      notes:
        'Medians over runs. evalshaEmptyScript: per call, 64 in flight, 1 key + N extra arguments; perArgument = (100-arg call − 0-arg call) / 100. luaPerKey: scripts of 100 keys doing only SET NX PX (claim) and GET + SET PX (commit); commandUs from INFO commandstats, serverCpuUs from INFO cpu. plainPipelinedPerKey: the same writes as plain pipelined commands. pingRoundTripUs: one PING at a time, wall time.',
    };
    mkdirSync(join(OUT, '..'), { recursive: true });
    writeFileSync(OUT, `${JSON.stringify(result, null, 2)}\n`);
    console.log(JSON.stringify(result, null, 2));
  } finally {
    redis.disconnect();
    await server.destroy();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
