/**
 * A loopback TCP proxy in front of Redis that can lose one reply for real: once armed with a
 * byte pattern (a script's SHA), it forwards the next client chunk holding it to Redis, lets Redis
 * run it, and when Redis answers it resets the client's connection (TCP RST) instead of
 * forwarding the reply. Other connections and later ones are forwarded untouched.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export class ReplyResetProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private armed: Buffer | undefined;
  /** Replies dropped so far (connections reset after Redis answered). */
  resets = 0;

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
      let dropReply = false;
      client.on('data', (chunk: Buffer) => {
        if (this.armed && chunk.includes(this.armed)) {
          this.armed = undefined;
          dropReply = true;
        }
        upstream.write(chunk);
      });
      upstream.on('data', (chunk: Buffer) => {
        if (!dropReply) {
          client.write(chunk);
          return;
        }
        // Redis ran the command and answered: the answer never reaches the client.
        this.resets++;
        client.resetAndDestroy();
        upstream.destroy();
      });
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

  /** Loses the reply to the next command whose bytes contain `pattern`. */
  dropReplyTo(pattern: string): void {
    this.armed = Buffer.from(pattern);
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
