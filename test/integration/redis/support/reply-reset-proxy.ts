/**
 * A loopback TCP proxy in front of Redis that can lose one reply for real: once armed with a
 * byte pattern (a script's SHA), it forwards the next client chunk holding it to Redis, lets Redis
 * run it, and when Redis answers it resets the client's connection (TCP RST) instead of
 * forwarding the reply. Other connections and later ones are forwarded untouched.
 */
import type { Socket } from 'node:net';
import { LoopbackProxy, type ProxiedPair } from '../../../support/loopback-proxy';

export class ReplyResetProxy extends LoopbackProxy {
  private armed: Buffer | undefined;
  /** Client connections whose next reply is to be lost. */
  private readonly dropping = new WeakSet<Socket>();
  /** Replies dropped so far (connections reset after Redis answered). */
  resets = 0;

  /** Loses the reply to the next command whose bytes contain `pattern`. */
  dropReplyTo(pattern: string): void {
    this.armed = Buffer.from(pattern);
  }

  protected override fromClient(chunk: Buffer, pair: ProxiedPair): void {
    if (this.armed && chunk.includes(this.armed)) {
      this.armed = undefined;
      this.dropping.add(pair.client);
    }
    pair.upstream.write(chunk);
  }

  protected override fromUpstream(chunk: Buffer, pair: ProxiedPair): void {
    if (!this.dropping.has(pair.client)) {
      pair.client.write(chunk);
      return;
    }
    // Redis ran the command and answered: the answer never reaches the client.
    this.resets++;
    pair.client.resetAndDestroy();
    pair.upstream.destroy();
  }
}
