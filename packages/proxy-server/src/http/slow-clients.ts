/**
 * Closes connections of clients too slow to be honest (Slowloris, slow-body and slow-read
 * attacks), and only for the client's slowness, never the server's: a request the server
 * takes minutes to process (hashing a large commit) is not cut.
 *
 * - No request in flight and nothing received for `idleMs` (a fresh or keep-alive
 *   connection): closed.
 * - A request's headers begun but not complete within `headersMs`: closed.
 * - A request body must arrive within `bodyMs`, extended by one second per
 *   `bodyMinBytesPerSecond` bytes received (Apache mod_reqtimeout's rule), so an upload of
 *   any size at a reasonable rate is never cut; time while the server is not reading (its
 *   buffer full) does not count.
 * - A response the client does not read (the socket's buffer stays full) for `idleMs`:
 *   closed.
 * Upgraded connections (WebSockets) leave this guard once upgraded.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { Server as TlsServer } from 'node:tls';
import type { Logger } from 'pino';
import type { TimeoutsConfig } from '../config.ts';

interface Watched {
  /** No request in flight since this time, with the socket's byte count then. */
  waiting?: { since: number; bytesAtStart: number };
  /** The request whose body is arriving. */
  body?: { req: IncomingMessage; since: number; bytesAtStart: number };
  /** The response being sent, and since when the client has not been taking it. */
  res?: { res: ServerResponse; stalledSince?: number };
}

export class SlowClientGuard {
  private readonly sockets = new Map<Socket, Watched>();
  private readonly timer: NodeJS.Timeout | undefined;
  private readonly connectionEvent: 'connection' | 'secureConnection';
  private lastCheck: number;
  /** Connections closed by this guard. */
  closed = 0;

  constructor(
    private readonly server: Server,
    private readonly t: TimeoutsConfig,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {
    // Over TLS, requests name the TLS socket, not the raw one.
    this.connectionEvent = server instanceof TlsServer ? 'secureConnection' : 'connection';
    this.lastCheck = now();
    if (t.idleMs === 0 && t.headersMs === 0 && t.bodyMs === 0) return;
    server.on(this.connectionEvent, this.onConnection);
    server.on('request', this.onRequest);
    server.on('upgrade', this.onUpgrade);
    const shortest = Math.min(...[t.idleMs, t.headersMs, t.bodyMs].filter((ms) => ms > 0));
    this.timer = setInterval(() => this.check(), Math.max(50, Math.min(1000, Math.floor(shortest / 4))));
    this.timer.unref();
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.server.off(this.connectionEvent, this.onConnection);
    this.server.off('request', this.onRequest);
    this.server.off('upgrade', this.onUpgrade);
    this.sockets.clear();
  }

  private readonly onConnection = (socket: Socket): void => {
    this.sockets.set(socket, { waiting: { since: this.now(), bytesAtStart: socket.bytesRead } });
    socket.once('close', () => this.sockets.delete(socket));
  };

  private readonly onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const socket = req.socket;
    const w = this.sockets.get(socket);
    if (!w) return;
    w.waiting = undefined;
    w.res = { res };
    const hasBody =
      Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;
    if (hasBody && !req.complete) w.body = { req, since: this.now(), bytesAtStart: socket.bytesRead };
    res.once('finish', () => {
      if (w.body?.req === req) w.body = undefined;
      if (w.res?.res === res) w.res = undefined;
      // Keep-alive: the connection waits for its next request from now.
      if (!socket.destroyed) w.waiting = { since: this.now(), bytesAtStart: socket.bytesRead };
    });
  };

  private readonly onUpgrade = (req: IncomingMessage): void => {
    this.sockets.delete(req.socket);
  };

  private check(): void {
    const now = this.now();
    const sinceLast = now - this.lastCheck;
    this.lastCheck = now;
    for (const [socket, w] of this.sockets) {
      if (socket.destroyed) {
        this.sockets.delete(socket);
        continue;
      }
      if (w.waiting) {
        const started = socket.bytesRead > w.waiting.bytesAtStart;
        const limit = started ? this.t.headersMs : this.t.idleMs;
        if (limit > 0 && now - w.waiting.since > limit)
          this.cut(socket, started ? 'request headers too slow' : 'idle', { ms: now - w.waiting.since });
        continue;
      }
      const b = w.body;
      if (b && b.req.complete) w.body = undefined;
      else if (b && this.t.bodyMs > 0) {
        // Time the server spends not reading (its buffer is full: it is patching, writing
        // to disk, waiting for the store) is not the client's.
        if (b.req.readableLength >= b.req.readableHighWaterMark) b.since += sinceLast;
        const received = socket.bytesRead - b.bytesAtStart;
        const allowance = this.t.bodyMs + (received / this.t.bodyMinBytesPerSecond) * 1000;
        if (now - b.since > allowance) {
          this.cut(socket, 'request body too slow', {
            received,
            ms: now - b.since,
            minBytesPerSecond: this.t.bodyMinBytesPerSecond,
          });
          continue;
        }
      }
      const r = w.res;
      if (r && this.t.idleMs > 0) {
        if (!r.res.writableNeedDrain) r.stalledSince = undefined;
        else if (r.stalledSince === undefined) r.stalledSince = now;
        else if (now - r.stalledSince > this.t.idleMs)
          this.cut(socket, 'response not read', { ms: now - r.stalledSince });
      }
    }
  }

  private cut(socket: Socket, why: string, details: Record<string, unknown>): void {
    this.sockets.delete(socket);
    this.closed += 1;
    this.log.warn({ remote: socket.remoteAddress, ...details }, `closing a slow connection: ${why}`);
    socket.destroy();
  }
}
