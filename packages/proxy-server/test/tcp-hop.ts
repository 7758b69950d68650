/** A TCP hop in front of PostgreSQL for partition tests (cluster-lease, cluster-ordering). */
import * as net from 'node:net';

/** A TCP hop to PostgreSQL that can stop carrying bytes (a partition) and carry them again. */
export async function forwarder(
  port: number,
): Promise<{ port: number; cut(): void; heal(): void; close(): void }> {
  const pairs: [net.Socket, net.Socket][] = [];
  let cut = false;
  const server = net.createServer((inbound) => {
    const outbound = net.connect(port, '127.0.0.1');
    inbound.pipe(outbound).pipe(inbound);
    inbound.on('error', () => outbound.destroy());
    outbound.on('error', () => inbound.destroy());
    pairs.push([inbound, outbound]);
    if (cut) for (const s of [inbound, outbound]) s.pause();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    // Nothing read either way: bytes wait in the kernel, as over a link that went dark.
    cut() {
      cut = true;
      for (const p of pairs) for (const s of p) s.pause();
    },
    heal() {
      cut = false;
      for (const p of pairs) for (const s of p) s.resume();
    },
    close() {
      for (const p of pairs) for (const s of p) s.destroy();
      server.close();
    },
  };
}
