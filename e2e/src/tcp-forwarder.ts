/**
 * A TCP forwarder on loopback (port 0) to one upstream address, whose link can be cut and
 * restored: the network partition of one proxy instance from PostgreSQL in the cluster
 * tests. Cutting stops forwarding in both directions on the connections already open (their
 * bytes wait in the sockets, as packets wait on a broken link: neither end sees a close)
 * and holds new connections unanswered; restoring forwards again, what waited included, as
 * TCP does when a partition heals. `reset` instead closes every connection at once (a
 * firewall that rejects).
 */
import * as net from 'node:net';

interface Pair {
  readonly client: net.Socket;
  upstream: net.Socket | undefined;
  /** Its far end gave up during a cut: on healing, the near end learns it (reset). */
  dead?: boolean;
}

export class TcpForwarder {
  private readonly pairs = new Set<Pair>();
  private cutNow = false;
  private givingUp: NodeJS.Timeout | undefined;
  /** Connections accepted so far (a test can see that the instance reconnected). */
  accepted = 0;

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
    private readonly upstreamHost: string,
    private readonly upstreamPort: number,
  ) {}

  static async start(upstreamHost: string, upstreamPort: number): Promise<TcpForwarder> {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', resolve);
    });
    const f = new TcpForwarder(
      server,
      (server.address() as net.AddressInfo).port,
      upstreamHost,
      upstreamPort,
    );
    server.on('connection', (c) => f.accept(c));
    return f;
  }

  get isCut(): boolean {
    return this.cutNow;
  }

  /** Connections open now (client side). */
  get open(): number {
    return this.pairs.size;
  }

  private accept(client: net.Socket): void {
    this.accepted += 1;
    const pair: Pair = { client, upstream: undefined };
    this.pairs.add(pair);
    client.setNoDelay(true);
    client.on('error', () => undefined);
    client.once('close', () => {
      this.pairs.delete(pair);
      pair.upstream?.destroy();
    });
    if (this.cutNow) client.pause();
    else this.link(pair);
  }

  private link(pair: Pair): void {
    if (pair.client.destroyed) return;
    if (!pair.upstream) {
      const up = net.connect(this.upstreamPort, this.upstreamHost);
      up.setNoDelay(true);
      up.on('error', () => pair.client.destroy());
      up.once('close', () => pair.client.destroy());
      pair.upstream = up;
    }
    pair.client.pipe(pair.upstream);
    pair.upstream.pipe(pair.client);
    pair.client.resume();
    pair.upstream.resume();
  }

  /**
   * Partition: 'blackhole' (default) stops every byte both ways without closing anything;
   * 'reset' closes every open connection and any made while cut. In a blackhole the far
   * side (PostgreSQL) gives up on its connections after `upstreamGivesUpMs` — its TCP
   * keepalives going unanswered (the proxy's CLUSTER_KEEPALIVES: 4 s + 3 × 2 s), which a
   * forwarder's own socket would otherwise answer — releasing what their sessions held;
   * the near side (the proxy) hears nothing.
   */
  cut(mode: 'blackhole' | 'reset' = 'blackhole', upstreamGivesUpMs = 10_000): void {
    this.cutNow = true;
    for (const p of this.pairs) {
      if (mode === 'reset') {
        p.client.destroy();
        continue;
      }
      p.client.unpipe();
      p.upstream?.unpipe();
      p.client.pause();
      p.upstream?.pause();
    }
    if (mode === 'reset') this.resetting = true;
    else {
      const cut = [...this.pairs];
      this.givingUp = setTimeout(() => {
        for (const p of cut) {
          if (!this.cutNow) return;
          // The far end's session is gone; the near end keeps a dead connection (detached,
          // so its close does not reach it) until the link heals.
          p.upstream?.removeAllListeners('close');
          p.upstream?.removeAllListeners('error');
          p.upstream?.on('error', () => undefined);
          p.upstream?.destroy();
          p.upstream = undefined;
          p.dead = true;
        }
      }, upstreamGivesUpMs);
    }
  }

  private set resetting(on: boolean) {
    this.server.removeAllListeners('connection');
    this.server.on('connection', (c) => (on && this.cutNow ? c.destroy() : this.accept(c)));
  }

  /** Heal: forward again, on the connections held meanwhile too. */
  restore(): void {
    this.cutNow = false;
    this.resetting = false;
    clearTimeout(this.givingUp);
    for (const p of this.pairs) {
      if (p.dead) p.client.destroy();
      else this.link(p);
    }
  }

  async close(): Promise<void> {
    clearTimeout(this.givingUp);
    for (const p of this.pairs) {
      p.client.destroy();
      p.upstream?.destroy();
    }
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
