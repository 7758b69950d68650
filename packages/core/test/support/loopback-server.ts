/**
 * A plain HTTP server on a free loopback port, standing for a proxy instance in the client's
 * tests (proxy-client-failover, transfer-steering). `close()` cuts open connections too (a
 * kept-alive one would hold it open) and may be called again.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface LoopbackServer {
  readonly url: string;
  close(): Promise<void>;
}

export async function listenLoopback(handler: http.RequestListener): Promise<LoopbackServer> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  let closed: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      (closed ??= new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      })),
  };
}
