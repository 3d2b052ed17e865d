/**
 * A loopback TCP proxy for fault tests: every client connection gets its own connection to the
 * target, and each chunk passes through a hook that forwards it, holds it back or cuts the pair.
 * The default hooks forward everything; subclasses change what a fault needs.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

/** One proxied connection: the test's client side and the target side. */
export interface ProxiedPair {
  readonly client: Socket;
  readonly upstream: Socket;
}

export class LoopbackProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  /** Listens on an ephemeral loopback port; resolves with it. */
  async listen(): Promise<number> {
    this.server = createServer((client) => {
      const upstream = connect(this.targetPort, this.targetHost);
      const pair: ProxiedPair = { client, upstream };
      this.sockets.add(client);
      this.sockets.add(upstream);
      client.on('data', (chunk: Buffer) => this.fromClient(chunk, pair));
      upstream.on('data', (chunk: Buffer) => this.fromUpstream(chunk, pair));
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

  /** A chunk the client sent; default: forward it to the target. */
  protected fromClient(chunk: Buffer, pair: ProxiedPair): void {
    pair.upstream.write(chunk);
  }

  /** A chunk the target sent; default: forward it to the client. */
  protected fromUpstream(chunk: Buffer, pair: ProxiedPair): void {
    pair.client.write(chunk);
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
