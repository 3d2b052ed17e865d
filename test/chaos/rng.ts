/**
 * The demo's seeded PRNG (mulberry32) with what the chaos harness needs besides: the same seed
 * gives the same fault schedule and message plan.
 */
import { Rng as DemoRng } from '../../examples/demo/rng';

export class Rng extends DemoRng {
  /** Integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** One element of a non-empty list. */
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }

  /** A child generator, so one consumer of randomness does not shift another's sequence. */
  fork(label: string): Rng {
    let h = this.state ^ 0x9e3779b9;
    for (let i = 0; i < label.length; i++) h = Math.imul(h ^ label.charCodeAt(i), 0x01000193);
    return new Rng(h >>> 0);
  }
}
