/**
 * The payments example's downstream store: a Redis hash per payment holding the charge. Writes
 * are fenced: a write carrying a fencing token lower than the stored one is refused, so a worker
 * whose lease was taken over can never overwrite the newer owner's charge.
 */
import type { Redis } from 'ioredis';

/** Writes `charge` unless a write with a higher fencing token is already stored. Returns 1 when written. */
const FENCED_WRITE = `
local current = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
if tonumber(ARGV[1]) < current then return 0 end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'chargeId', ARGV[2], 'amountCents', ARGV[3], 'account', ARGV[4])
redis.call('HINCRBY', KEYS[1], 'writes', 1)
return 1
`;

/** A charge as stored. */
export interface Charge {
  readonly chargeId: string;
  readonly amountCents: number;
  readonly account: string;
}

/** The ledger. `prefix` namespaces its keys (`<prefix>:payment:<id>`). */
export class Ledger {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  /**
   * Records the charge of `paymentId` with the lease's fencing token.
   * @returns false when a newer owner already wrote (this worker lost its lease)
   */
  async charge(paymentId: string, charge: Charge, fencingToken: number): Promise<boolean> {
    const written = await this.redis.eval(FENCED_WRITE, 1, `${this.prefix}:payment:${paymentId}`, String(fencingToken), charge.chargeId, String(charge.amountCents), charge.account);
    return written === 1;
  }

  /** How many times a payment's charge was written (1 when applied once). */
  async writes(paymentId: string): Promise<number> {
    return Number((await this.redis.hget(`${this.prefix}:payment:${paymentId}`, 'writes')) ?? 0);
  }
}
