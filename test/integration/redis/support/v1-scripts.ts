/**
 * The previous RedisClaimer version's scripts (support/record-v1/*.lua), run by hand with their
 * own ARGV layout, so a test can play an old replica beside the current claimer.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type Redis from 'ioredis';

const DIR = join(__dirname, 'record-v1');
const RECORD = readFileSync(join(DIR, 'record.lua'), 'utf8');
const source = (name: string) => readFileSync(join(DIR, `${name}.lua`), 'utf8').replace('--- @include "record"', () => RECORD);
const CLAIM = source('claim');
const COMMIT = source('commit');
const RELEASE = source('release');

/** A v1 claim entry: {1, fence, attempts}, {2, result}, {3, remainingMs}, {4, fp} or {5}. */
export type V1ClaimEntry = [number, ...unknown[]];

/** An old replica: v1 claim, commit and release of one record key each. */
export class V1Replica {
  constructor(private readonly client: Redis) {}

  async claim(recordKey: string, owner: string, leaseTtlMs: number, doneTtlMs: number, fingerprint?: string): Promise<V1ClaimEntry> {
    const reply = (await this.client.eval(CLAIM, 1, recordKey, '0', owner, String(leaseTtlMs), String(doneTtlMs), fingerprint === undefined ? '' : `=${fingerprint}`)) as unknown[];
    return reply[2] as V1ClaimEntry;
  }

  /** Returns the v1 lease code: 1 OK, 2 COMMITTED, 3 RELEASED, 0 LOST, 5 FOREIGN. */
  async commit(recordKey: string, fence: number, owner: string, doneTtlMs: number, resultJson = ''): Promise<number> {
    const reply = (await this.client.eval(COMMIT, 1, recordKey, '0', String(fence), owner, String(doneTtlMs), resultJson)) as unknown[];
    return reply[2] as number;
  }

  async release(recordKey: string, fence: number, owner: string, reset = false): Promise<number> {
    const reply = (await this.client.eval(RELEASE, 1, recordKey, '0', String(fence), owner, reset ? '1' : '0')) as unknown[];
    return reply[2] as number;
  }
}
