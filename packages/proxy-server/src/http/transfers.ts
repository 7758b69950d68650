/**
 * Large-file transfers: open one, read its state, abandon it, and send its blocks — one
 * per request (synchronous ack) or over the /v1/stream WebSocket (acks and nacks as JSON).
 */
import { z } from 'zod/v4';
import {
  BLOCK_HEADER_SIZE,
  BlockAck,
  type BlockNack,
  MAX_BLOCK_PAYLOAD,
  peekTransferBlockHeader,
  TransferCreateRequest,
  TransferState,
} from '@weft/wire';
import { ApiError, toApiError } from '../errors.ts';
import type { TransferService } from '../transfers.ts';
import type { DeviceSessions } from './devices.ts';
import { binaryBody, errorBody, type RouteContext } from './route.ts';

const TransferParams = z.object({ id: z.string().regex(/^[0-9a-f]{32}$/) });

export function registerTransferRoutes(
  ctx: RouteContext,
  deps: {
    transfers: TransferService;
    devices: DeviceSessions;
    /** Another instance new transfers should go to (more available bandwidth), if any. */
    steer?: () => { id: string; url: string } | undefined;
  },
): void {
  const { app, route, document, auth, parse } = ctx;
  const { transfers, devices } = deps;
  // The instance preferred now, on opening a transfer and on reading its state: an agent
  // that resumes a saved transfer (after a restart or a failover) reads it, and is steered
  // as a new one is. Nothing to steer when the server holds the object or every byte.
  const steered = (st: TransferState): TransferState => {
    const preferred = st.haveObject || st.receivedBytes >= st.size ? undefined : deps.steer?.();
    return preferred ? { ...st, preferred } : st;
  };

  route(
    {
      method: 'POST',
      url: '/v1/transfers',
      summary:
        'Open a large-file transfer (a size above maxFileBytes: 413 FILE_TOO_LARGE); `preferred` names a less loaded instance to send its blocks to',
      auth: 'device',
      body: TransferCreateRequest,
      response: TransferState,
    },
    async (req, reply) => {
      const a = auth(req);
      const body = parse(TransferCreateRequest, req.body);
      const { path, size, sha256, mtimeMs } = body;
      const st = await transfers.open(a, { path, size, sha256, mtimeMs }, transfers.now());
      void reply.code(201);
      return steered(st);
    },
  );
  route(
    {
      method: 'GET',
      url: '/v1/transfers/:id',
      summary:
        'Transfer state (acknowledged ranges); `preferred` names the less loaded instance now, while blocks are missing',
      auth: 'device',
      response: TransferState,
    },
    async (req) => {
      const a = auth(req);
      const { id } = parse(TransferParams, req.params);
      return steered(await transfers.state(await transfers.get(a, id)));
    },
  );
  route(
    { method: 'DELETE', url: '/v1/transfers/:id', summary: 'Abandon a transfer', auth: 'device' },
    async (req, reply) => {
      const a = auth(req);
      const { id } = parse(TransferParams, req.params);
      await transfers.get(a, id);
      await transfers.remove(id);
      return reply.code(204).send();
    },
  );
  route(
    {
      method: 'PUT',
      url: '/v1/transfers/:id/blocks',
      summary: 'Send one transfer block (synchronous ack)',
      auth: 'device',
      binaryBody: 'application/octet-stream',
      response: BlockAck,
    },
    async (req) => {
      const a = auth(req);
      const { id } = parse(TransferParams, req.params);
      const bytes = binaryBody(req);
      const peek = peekTransferBlockHeader(bytes);
      if (peek && peek.transferId !== id)
        throw new ApiError('BAD_REQUEST', 'block belongs to another transfer');
      return transfers.block(a, bytes);
    },
    BLOCK_HEADER_SIZE + MAX_BLOCK_PAYLOAD + 1024,
  );

  document({
    method: 'GET',
    url: '/v1/stream',
    summary: 'WebSocket: send transfer blocks (binary), receive BlockAck/BlockNack (JSON)',
    auth: 'device',
    websocket: true,
    response: BlockAck,
  });
  app.get('/v1/stream', { websocket: true }, (socket, req) => {
    const a = auth(req);
    if (!devices.track(a.deviceId, socket)) return;
    socket.on('message', (data: Buffer, isBinary: boolean) => {
      const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
      transfers.countStreamed(bytes.byteLength);
      const peek = isBinary ? peekTransferBlockHeader(bytes) : undefined;
      const work = isBinary
        ? transfers.block(a, bytes)
        : Promise.reject(new ApiError('BAD_REQUEST', 'send blocks as binary messages'));
      work.then(
        (ack) => socket.send(JSON.stringify(ack)),
        (e: unknown) => {
          const nack: BlockNack = {
            type: 'block-error',
            ...(peek ? { transferId: peek.transferId, seq: peek.seq } : {}),
            error: errorBody(toApiError(e)).error,
          };
          socket.send(JSON.stringify(nack));
        },
      );
    });
  });
}
