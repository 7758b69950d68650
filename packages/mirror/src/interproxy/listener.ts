/**
 * A stand-alone peer endpoint (plain Node HTTP + ws) for a PeerReceiver: what the proxy
 * server's hook does inside Fastify, for tests and for running a destination without the
 * rest of the proxy. The upgrade is refused with 401 before any protocol state exists when
 * the peer's signature does not check out.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { PeerAuthError } from './auth.ts';
import { PEER_STREAM_PATH } from './frames.ts';
import type { PeerReceiver } from './receiver.ts';

export interface PeerListener {
  /** ws://127.0.0.1:port/peer/v1/stream */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

export async function listenPeer(
  receiver: PeerReceiver,
  options: { host?: string; port?: number; maxPayload?: number } = {},
): Promise<PeerListener> {
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: options.maxPayload ?? 4 * 1024 * 1024 + 64 * 1024,
    perMessageDeflate: false,
  });
  const server = http.createServer((_req, res) => {
    res.writeHead(404).end();
  });
  server.on('upgrade', (req, socket, head) => {
    const path = (req.url ?? '').split('?')[0];
    let who: { peer: string; nonce: string };
    try {
      if (path !== PEER_STREAM_PATH) throw new PeerAuthError('no such route');
      who = receiver.auth.verify(req.headers);
    } catch (e) {
      const status = path === PEER_STREAM_PATH ? 401 : 404;
      socket.end(
        `HTTP/1.1 ${status} ${status === 401 ? 'Unauthorized' : 'Not Found'}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`,
      );
      void e;
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => receiver.accept(ws, who));
  });
  await new Promise<void>((resolve) =>
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve),
  );
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `ws://${options.host ?? '127.0.0.1'}:${port}${PEER_STREAM_PATH}`,
    async close() {
      for (const c of wss.clients) c.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
