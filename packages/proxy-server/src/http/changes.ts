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
      const seq = meta.currentSeq(a.userId);
      if (q.cursor > seq) return { changes: [], cursor: seq, hasMore: false, reset: true };
      const changes = meta.changesSince(a.userId, q.cursor, q.limit);
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
    const seqNow = meta.currentSeq(a.userId);
    send({ type: 'hello', user: a.userId, seq: seqNow, cursor: Math.min(sent, seqNow) });
    if (sent > seqNow) {
      send({ type: 'reset', cursor: seqNow });
      sent = seqNow;
    }
    let busy = false;
    let again = false;
    const pump = (): void => {
      if (busy) {
        again = true;
        return;
      }
      busy = true;
      try {
        do {
          again = false;
          for (;;) {
            if (socket.readyState !== socket.OPEN) return;
            const page = meta.changesSince(a.userId, sent, 500);
            const last = page.at(-1);
            if (!last) break;
            send({ type: 'changes', changes: page, cursor: last.seq });
            sent = last.seq;
          }
        } while (again);
      } finally {
        busy = false;
      }
    };
    const stop = hub.listen(a.userId, pump);
    socket.on('message', (data: Buffer) => {
      const msg = FeedClientMessage.safeParse(safeJson(data.toString('utf8')));
      if (!msg.success) send({ type: 'error', error: { code: 'BAD_REQUEST', message: 'unknown message' } });
    });
    socket.on('close', () => {
      stop();
      metrics.feedClients.dec();
    });
    pump();
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
      return { nodes: body.paths.map((p) => merkle.node(a.userId, p)) };
    },
  );
}
