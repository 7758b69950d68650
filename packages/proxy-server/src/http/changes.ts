/**
 * The change feed (polling and WebSocket) and the Merkle check. The WebSocket sends a
 * hello, then pages of changes after the client's cursor, then every new page as the
 * namespace's feed grows (or a reset when the cursor is ahead of the feed).
 */
import { z } from 'zod/v4';
import {
  ChangesQuery,
  ChangesResponse,
  FeedClientMessage,
  type FeedServerMessage,
  MerkleRequest,
  MerkleResponse,
} from '@weft/wire';
import type { ChangeHub } from '../change-hub.ts';
import type { MerkleIndex } from '../merkle.ts';
import type { ProxyMetrics } from '../metrics.ts';
import type { MetadataStore } from '../store/metadata.ts';
import type { DeviceSessions } from './devices.ts';
import { type RouteContext, safeJson } from './route.ts';

export function registerChangeRoutes(
  ctx: RouteContext,
  deps: {
    meta: MetadataStore;
    hub: ChangeHub;
    merkle: MerkleIndex;
    devices: DeviceSessions;
    metrics: ProxyMetrics;
  },
): void {
  const { app, route, document, auth, parse } = ctx;
  const { meta, hub, merkle, devices, metrics } = deps;

  route(
    {
      method: 'GET',
      url: '/v1/changes',
      summary: 'Changes after a cursor (polling)',
      auth: 'device',
      query: ChangesQuery,
      response: ChangesResponse,
    },
    async (req) => {
      const a = auth(req);
      const q = parse(ChangesQuery, req.query);
      const seq = await meta.currentSeq(a.userId);
      if (q.cursor > seq) return { changes: [], cursor: seq, hasMore: false, reset: true };
      const changes = await meta.changesSince(a.userId, q.cursor, q.limit);
      const cursor = changes.at(-1)?.seq ?? q.cursor;
      return { changes, cursor, hasMore: cursor < seq, reset: false };
    },
  );

  document({
    method: 'GET',
    url: '/v1/feed',
    summary: 'WebSocket change feed: ?cursor=N, then hello / changes / reset messages',
    auth: 'device',
    websocket: true,
  });
  app.get('/v1/feed', { websocket: true }, (socket, req) => {
    const a = auth(req);
    if (!devices.track(a.deviceId, socket)) return;
    const cursorRaw = (req.query as Record<string, unknown>).cursor ?? '0';
    const parsed = z.coerce.number().int().min(0).safeParse(cursorRaw);
    const send = (m: FeedServerMessage): void => socket.send(JSON.stringify(m));
    if (!parsed.success) {
      send({
        type: 'error',
        error: { code: 'BAD_REQUEST', message: 'cursor must be a non-negative integer' },
      });
      socket.close(1008, 'bad cursor');
      return;
    }
    metrics.feedClients.inc();
    let sent = parsed.data;
    let closed = false;
    let stop = (): void => undefined;
    socket.on('message', (data: Buffer) => {
      const msg = FeedClientMessage.safeParse(safeJson(data.toString('utf8')));
      if (!msg.success) send({ type: 'error', error: { code: 'BAD_REQUEST', message: 'unknown message' } });
    });
    socket.on('close', () => {
      closed = true;
      stop();
      metrics.feedClients.dec();
    });
    const failed = (err: unknown): void => {
      req.log.error({ err, user: a.userId }, 'change feed failed');
      if (socket.readyState === socket.OPEN) socket.close(1011, 'internal error');
    };
    // One page read at a time, in order; a notification during a read asks for another pass.
    let busy = false;
    let again = false;
    const drain = async (): Promise<void> => {
      do {
        again = false;
        for (;;) {
          if (socket.readyState !== socket.OPEN) return;
          const page = await meta.changesSince(a.userId, sent, 500);
          const last = page.at(-1);
          if (!last || socket.readyState !== socket.OPEN) break;
          send({ type: 'changes', changes: page, cursor: last.seq });
          sent = last.seq;
        }
      } while (again);
    };
    const pump = (): void => {
      if (busy) {
        again = true;
        return;
      }
      busy = true;
      drain()
        .catch(failed)
        .finally(() => {
          busy = false;
        });
    };
    const start = async (): Promise<void> => {
      const seqNow = await meta.currentSeq(a.userId);
      if (closed) return;
      send({ type: 'hello', user: a.userId, seq: seqNow, cursor: Math.min(sent, seqNow) });
      if (sent > seqNow) {
        send({ type: 'reset', cursor: seqNow });
        sent = seqNow;
      }
      // Listening before the first read: a change recorded meanwhile is read by one or the other.
      stop = hub.listen(a.userId, pump);
      pump();
    };
    start().catch(failed);
  });

  route(
    {
      method: 'POST',
      url: '/v1/merkle',
      summary: 'Merkle hashes of entries and their children (top-down check)',
      auth: 'device',
      body: MerkleRequest,
      response: MerkleResponse,
    },
    async (req) => {
      const a = auth(req);
      const body = parse(MerkleRequest, req.body);
      const nodes = [];
      for (const p of body.paths) nodes.push(await merkle.node(a.userId, p));
      return { nodes };
    },
  );
}
