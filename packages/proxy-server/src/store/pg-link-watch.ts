/**
 * A PostgreSQL link gone dark (a partition, a frozen server: nothing answered, nothing
 * closed) leaves a query waiting for ever: the client (`postgres`) has no query timeout, and
 * TCP gives up only after many minutes — never while a frozen server's kernel still answers
 * the keepalive probes. So the pools' sockets are made here and watched: each request that
 * awaits an answer (the startup, every Sync and simple Query message) is counted, each
 * ReadyForQuery that ends one is counted off, and while one is awaited and nothing at all
 * has arrived for `responseTimeoutMs`, the socket is destroyed with a clear error — the
 * queries on it fail with it, and the pool makes a new connection for the next. With the
 * server's statement_timeout below that, a statement that is merely slow is ended by the
 * server first (an ordinary error), never by this.
 *
 * Plain TCP and Unix sockets only: under TLS the messages cannot be read here, so a TLS link
 * has keepalive and statement_timeout only.
 */
import * as net from 'node:net';

/** The connection options of `postgres` this reads. */
interface SocketOptions {
  readonly host?: readonly string[];
  readonly port?: readonly number[];
  readonly path?: string;
  readonly ssl?: unknown;
  readonly connect_timeout?: number;
}

/** PostgreSQL's protocol 3.0 startup code and the cancel request's (untyped first messages). */
const PROTOCOL_3 = 196608;

/**
 * Splits a byte stream into protocol messages (1-byte type, then a 4-byte length counting
 * itself; the first message of a client's stream has no type byte) and reports each type.
 */
class MessageFramer {
  private header = Buffer.alloc(0);
  private skip = 0;

  constructor(
    private untypedFirst: boolean,
    private readonly onMessage: (type: number, head: Buffer) => void,
  ) {}

  feed(chunk: Uint8Array): void {
    let at = 0;
    while (at < chunk.byteLength) {
      if (this.skip > 0) {
        const n = Math.min(this.skip, chunk.byteLength - at);
        this.skip -= n;
        at += n;
        continue;
      }
      // Untyped: length + code (8 bytes read); typed: type + length (5 bytes).
      const want = this.untypedFirst ? 8 : 5;
      const take = Math.min(want - this.header.byteLength, chunk.byteLength - at);
      this.header = Buffer.concat([this.header, chunk.subarray(at, at + take)]);
      at += take;
      if (this.header.byteLength < want) return;
      const head = this.header;
      this.header = Buffer.alloc(0);
      if (this.untypedFirst) {
        this.untypedFirst = false;
        this.skip = Math.max(0, head.readInt32BE(0) - 8);
        this.onMessage(0, head);
      } else {
        this.skip = Math.max(0, head.readInt32BE(1) - 4);
        this.onMessage(head[0] as number, head);
      }
    }
  }
}

/** Why a watched socket was dropped. */
export class PgLinkTimeoutError extends Error {
  readonly code = 'PG_LINK_TIMEOUT';
}

/** Watch `socket` (plain protocol bytes both ways) as described above. */
export function watchResponses(socket: net.Socket, responseTimeoutMs: number, where: string): void {
  let awaited = 0;
  let lastHeard = performance.now();
  const sent = new MessageFramer(true, (type, head) => {
    // 'S' Sync and 'Q' Query each end in one ReadyForQuery; so does the startup.
    if (type === 0x53 || type === 0x51 || (type === 0 && head.readInt32BE(4) === PROTOCOL_3)) {
      if (awaited === 0) lastHeard = performance.now();
      awaited += 1;
    }
  });
  const heard = new MessageFramer(false, (type) => {
    if (type === 0x5a) awaited = Math.max(0, awaited - 1); // 'Z' ReadyForQuery
  });
  const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
  socket.write = ((chunk: unknown, ...rest: unknown[]): boolean => {
    if (chunk instanceof Uint8Array) sent.feed(chunk);
    return write(chunk, ...rest);
  }) as typeof socket.write;
  socket.on('data', (chunk: Buffer) => {
    lastHeard = performance.now();
    heard.feed(chunk);
  });
  const timer = setInterval(
    () => {
      if (socket.destroyed) return clearInterval(timer);
      if (awaited === 0) return;
      const silentMs = performance.now() - lastHeard;
      if (silentMs < responseTimeoutMs) return;
      socket.destroy(
        new PgLinkTimeoutError(
          `PostgreSQL at ${where} did not answer for ${Math.round(silentMs / 1000)} s ` +
            `(link lost or server frozen): the connection is dropped and its queries fail`,
        ),
      );
    },
    Math.max(50, Math.min(1000, responseTimeoutMs / 4)),
  );
  timer.unref();
  socket.once('close', () => clearInterval(timer));
}

/**
 * The `socket` option of a `postgres` pool: a connected socket (host after host, as the
 * client does), watched unless the connection uses TLS.
 */
export function watchedSocketFactory(responseTimeoutMs: number): (o: SocketOptions) => Promise<net.Socket> {
  let next = 0;
  return (o) =>
    new Promise<net.Socket>((resolve, reject) => {
      let socket: net.Socket;
      let where: string;
      if (o.path) {
        where = o.path;
        socket = net.connect(o.path);
      } else {
        const hosts = o.host?.length ? o.host : ['localhost'];
        const i = next++ % hosts.length;
        const host = hosts[i] as string;
        const port = o.port?.[i] ?? o.port?.[0] ?? 5432;
        where = `${host}:${port}`;
        socket = net.connect(port, host);
      }
      const limitMs = (o.connect_timeout ?? 30) * 1000;
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new PgLinkTimeoutError(`PostgreSQL at ${where}: no connection within ${limitMs / 1000} s`));
      }, limitMs);
      socket.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeAllListeners('error');
        socket.on('error', () => undefined); // the client adds its own listener next
        if (!o.ssl) watchResponses(socket, responseTimeoutMs, where);
        resolve(socket);
      });
    });
}
