/**
 * A loopback TCP proxy a test can freeze: while frozen, bytes in both directions are held back
 * (an unresponsive server, as with `CLIENT PAUSE`, but only for this test's client).
 */
import type { Socket } from 'node:net';
import { LoopbackProxy, type ProxiedPair } from '../../../support/loopback-proxy';

export class FreezableProxy extends LoopbackProxy {
  private frozen = false;
  private readonly pending: (() => void)[] = [];

  freeze(): void {
    this.frozen = true;
  }

  /** Delivers what was held back, in order, and forwards again. */
  thaw(): void {
    this.frozen = false;
    for (const send of this.pending.splice(0)) send();
  }

  protected override fromClient(chunk: Buffer, pair: ProxiedPair): void {
    this.pass(chunk, pair.upstream);
  }

  protected override fromUpstream(chunk: Buffer, pair: ProxiedPair): void {
    this.pass(chunk, pair.client);
  }

  private pass(chunk: Buffer, to: Socket): void {
    if (this.frozen) this.pending.push(() => to.write(chunk));
    else to.write(chunk);
  }
}
