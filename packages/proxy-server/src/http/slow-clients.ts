/**
 * Closes connections of clients too slow to be honest (Slowloris and slow-body attacks):
 * headers must arrive within `headersMs`; a request body within `bodyMs`, extended by one
 * second per `bodyMinBytesPerSecond` bytes received (Apache mod_reqtimeout's rule), so an
 * upload of any size at a reasonable rate is never cut. Connections idle in both
 * directions are closed by the socket timeout (`idleMs`, set on the server by Fastify's
 * `connectionTimeout`). Upgraded connections (WebSockets) leave this guard once upgraded.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';
import { Server as TlsServer } from 'node:tls';
import type { Logger } from 'pino';
import type { TimeoutsConfig } from '../config.ts';

interface Watched {
  /** Waiting for a request's headers since this time (undefined: not waiting). */
  headersSince?: number;
  /** The request whose body is arriving, with the socket's byte count when it started. */
  body?: { req: IncomingMessage; since: number; bytesAtStart: number };
}

export class SlowClientGuard {
  private readonly sockets = new Map<Socket, Watched>();
  private readonly timer: NodeJS.Timeout | undefined;
  private readonly connectionEvent: 'connection' | 'secureConnection' = 'connection';
  private lastCheck: number;
  /** Connections closed by this guard (for tests and metrics). */
  closed = 0;

  constructor(
    private readonly server: Server,
    private readonly t: TimeoutsConfig,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {
    this.lastCheck = now();
    if (t.headersMs === 0 && t.bodyMs === 0) return;
    // Over TLS, requests name the TLS socket, not the raw one.
    this.connectionEvent = server instanceof TlsServer ? 'secureConnection' : 'connection';
    server.on(this.connectionEvent, this.onConnection);
    server.on('request', this.onRequest);
    server.on('upgrade', this.onUpgrade);
    const tick = Math.max(
      50,
      Math.min(1000, Math.floor(Math.min(t.headersMs || 1000, t.bodyMs || 1000) / 4)),
    );
    this.timer = setInterval(() => this.check(), tick);
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
    this.sockets.set(socket, { headersSince: this.now() });
    socket.once('close', () => this.sockets.delete(socket));
  };

  private readonly onRequest = (
    req: IncomingMessage,
    res: { once(e: 'finish', f: () => void): void },
  ): void => {
    const w = this.sockets.get(req.socket);
    if (!w) return;
    w.headersSince = undefined;
    const hasBody =
      Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;
    if (hasBody && !req.complete) w.body = { req, since: this.now(), bytesAtStart: req.socket.bytesRead };
    // Keep-alive: the next request's headers are timed from the end of this response.
    res.once('finish', () => {
      if (w.body?.req === req) w.body = undefined;
      if (!req.socket.destroyed) w.headersSince = this.now();
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
      if (w.headersSince !== undefined && this.t.headersMs > 0 && now - w.headersSince > this.t.headersMs) {
        this.cut(socket, 'headers not received in time', { headersMs: this.t.headersMs });
        continue;
      }
      const b = w.body;
      if (!b || this.t.bodyMs === 0) continue;
      if (b.req.complete) {
        w.body = undefined;
        continue;
      }
      // Time the server spends not reading (its buffer is full: it is patching, writing to
      // disk, waiting for the store) is not the client's.
      if (b.req.readableLength >= b.req.readableHighWaterMark) b.since += sinceLast;
      const received = socket.bytesRead - b.bytesAtStart;
      const allowance = this.t.bodyMs + (received / this.t.bodyMinBytesPerSecond) * 1000;
      if (now - b.since > allowance)
        this.cut(socket, 'request body too slow', {
          received,
          ms: now - b.since,
          minBytesPerSecond: this.t.bodyMinBytesPerSecond,
        });
    }
  }

  private cut(socket: Socket, why: string, details: Record<string, unknown>): void {
    this.sockets.delete(socket);
    this.closed += 1;
    this.log.warn({ remote: socket.remoteAddress, ...details }, `closing a slow connection: ${why}`);
    socket.destroy();
  }
}
