/**
 * A rate-limited wide-area link in user space, for the inter-proxy bench and tests: TCP
 * forwarders that share one token bucket per direction (rate in bit/s, a burst depth) and
 * add a one-way latency, so every connection through the link — the peer WebSocket, a
 * baseline's cloud API calls — competes for the same capacity. `cutAll()` breaks every
 * connection at once, as a network failure would (bytes still "on the wire" are lost).
 */
import * as net from 'node:net';

export interface ThrottledLinkOptions {
  /** Capacity of each direction, bits per second. */
  readonly bitsPerSecond: number;
  /** One-way delay added to every byte, ms (the round trip is twice this). */
  readonly latencyMs: number;
  /** Token bucket depth, bytes (default 16 KiB). */
  readonly burstBytes?: number;
}

export interface LinkStats {
  /** Bytes carried towards the forwarded targets. */
  bytesUp: number;
  /** Bytes carried back. */
  bytesDown: number;
  connections: number;
}

/** One direction's token bucket: departure time of each piece, in FIFO order. */
class TokenBucket {
  private tokens: number;
  private t = performance.now();

  constructor(
    private readonly bytesPerMs: number,
    private readonly burst: number,
  ) {
    this.tokens = burst;
  }

  /** When `n` bytes finish leaving (ms, performance.now() clock). */
  depart(n: number): number {
    const now = performance.now();
    if (now > this.t) {
      this.tokens = Math.min(this.burst, this.tokens + (now - this.t) * this.bytesPerMs);
      this.t = now;
    }
    this.tokens -= n;
    if (this.tokens < 0) {
      this.t += -this.tokens / this.bytesPerMs;
      this.tokens = 0;
    }
    return this.t;
  }
}

export interface Forwarder {
  readonly host: string;
  readonly port: number;
  /** `http://host:port` of the forwarder. */
  readonly url: string;
  close(): Promise<void>;
}

const HIGH_WATER = 1024 * 1024;
const LOW_WATER = 256 * 1024;

export class ThrottledLink {
  readonly stats: LinkStats = { bytesUp: 0, bytesDown: 0, connections: 0 };
  private readonly up: TokenBucket;
  private readonly down: TokenBucket;
  private readonly burst: number;
  private readonly sockets = new Set<net.Socket>();
  private readonly servers = new Set<net.Server>();

  constructor(readonly options: ThrottledLinkOptions) {
    const bytesPerMs = options.bitsPerSecond / 8 / 1000;
    this.burst = options.burstBytes ?? 16 * 1024;
    this.up = new TokenBucket(bytesPerMs, this.burst);
    this.down = new TokenBucket(bytesPerMs, this.burst);
  }

  /** A loopback listener (port 0) whose connections reach `target` through this link. */
  async forward(target: { host: string; port: number }): Promise<Forwarder> {
    const server = net.createServer((client) => {
      const upstream = net.connect(target.port, target.host);
      this.stats.connections += 1;
      this.sockets.add(client);
      this.sockets.add(upstream);
      client.setNoDelay(true);
      upstream.setNoDelay(true);
      const end = (): void => {
        client.destroy();
        upstream.destroy();
        this.sockets.delete(client);
        this.sockets.delete(upstream);
      };
      this.pipe(client, upstream, this.up, (n) => (this.stats.bytesUp += n), end);
      this.pipe(upstream, client, this.down, (n) => (this.stats.bytesDown += n), end);
      client.on('error', end);
      upstream.on('error', end);
      // A socket closed in good order ends the other side only once the bytes still on the
      // wire (the one-way delay) have arrived: the pipe ends it after its queue drains. (Ending
      // it at once lost a peer's last bytes — rsync's final exchange, for one.)
      const closed = (s: net.Socket) => (hadError: boolean) => {
        if (hadError) end();
        else this.sockets.delete(s);
      };
      client.on('close', closed(client));
      upstream.on('close', closed(upstream));
    });
    this.servers.add(server);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const port = (server.address() as net.AddressInfo).port;
    return {
      host: '127.0.0.1',
      port,
      url: `http://127.0.0.1:${port}`,
      close: () =>
        new Promise<void>((resolve) => {
          this.servers.delete(server);
          server.close(() => resolve());
        }),
    };
  }

  private pipe(
    from: net.Socket,
    to: net.Socket,
    bucket: TokenBucket,
    count: (n: number) => void,
    end: () => void,
  ): void {
    // One FIFO per direction of a connection, drained by one timer: per-piece timers could
    // fire out of order (Node schedules them on its cached loop clock) and corrupt the stream.
    const queue: { at: number; piece: Buffer }[] = [];
    let queued = 0;
    let paused = false;
    let ending = false;
    let timer: NodeJS.Timeout | undefined;
    const drain = (): void => {
      timer = undefined;
      const now = performance.now();
      while (queue.length > 0 && (queue[0]?.at ?? 0) <= now) {
        const { piece } = queue.shift() as { at: number; piece: Buffer };
        queued -= piece.byteLength;
        if (to.destroyed) continue;
        count(piece.byteLength);
        to.write(piece);
      }
      if (paused && queued < LOW_WATER) {
        paused = false;
        from.resume();
      }
      const head = queue[0];
      if (head) timer = setTimeout(drain, Math.max(1, head.at - now));
      else if (ending) {
        if (!to.destroyed) to.end();
        else end();
      }
    };
    from.on('data', (chunk: Buffer) => {
      for (let off = 0; off < chunk.byteLength; off += this.burst) {
        const piece = chunk.subarray(off, Math.min(chunk.byteLength, off + this.burst));
        queue.push({ at: bucket.depart(piece.byteLength) + this.options.latencyMs, piece });
        queued += piece.byteLength;
      }
      if (!paused && queued > HIGH_WATER) {
        paused = true;
        from.pause();
      }
      timer ??= setTimeout(drain, Math.max(0, (queue[0]?.at ?? 0) - performance.now()));
    });
    from.on('end', () => {
      ending = true;
      timer ??= setTimeout(drain, 0);
    });
    from.on('close', () => {
      if (timer && to.destroyed) clearTimeout(timer);
    });
  }

  /** Break every connection through the link now. */
  cutAll(): number {
    const n = this.sockets.size;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    return n;
  }

  async close(): Promise<void> {
    this.cutAll();
    await Promise.all([...this.servers].map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
    this.servers.clear();
  }
}
