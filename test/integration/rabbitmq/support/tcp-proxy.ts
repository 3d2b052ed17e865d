/**
 * A loopback TCP proxy a test can freeze: while frozen, bytes in both directions are held back
 * (an unresponsive server, as with `CLIENT PAUSE`, but only for this test's client).
 */
import { createServer, type Server, type Socket, connect } from 'node:net';

export class FreezableProxy {
  private server: Server | undefined;
  private frozen = false;
  private readonly pending: (() => void)[] = [];
  private readonly sockets = new Set<Socket>();

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  /** Listens on an ephemeral loopback port; resolves with it. */
  async listen(): Promise<number> {
    this.server = createServer((client) => {
      const upstream = connect(this.targetPort, this.targetHost);
      this.sockets.add(client);
      this.sockets.add(upstream);
      const forward = (from: Socket, to: Socket) =>
        from.on('data', (chunk) => {
          if (this.frozen) this.pending.push(() => to.write(chunk));
          else to.write(chunk);
        });
      forward(client, upstream);
      forward(upstream, client);
      const close = () => {
        client.destroy();
        upstream.destroy();
        this.sockets.delete(client);
        this.sockets.delete(upstream);
      };
      client.on('close', close).on('error', close);
      upstream.on('close', close).on('error', close);
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const address = this.server.address();
    if (typeof address !== 'object' || address === null) throw new Error('proxy has no port');
    return address.port;
  }

  freeze(): void {
    this.frozen = true;
  }

  /** Delivers what was held back, in order, and forwards again. */
  thaw(): void {
    this.frozen = false;
    for (const send of this.pending.splice(0)) send();
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
