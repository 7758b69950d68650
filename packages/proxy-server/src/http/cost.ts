/** `GET /v1/cost` (docs/cost.md) and the egress count of every response, per user. */
import { PassThrough, Readable } from 'node:stream';
import { CostResponse } from '@weft/wire';
import type { CostService } from '../cost/service.ts';
import type { RouteContext } from './route.ts';

export function registerCostRoutes(ctx: RouteContext, cost: CostService): void {
  const { app, route, auth } = ctx;
  // What the proxy sends to a client is egress, billed per GB on the tier it runs on: every
  // response body's bytes, a streamed body (a file download) counted as it is sent.
  app.addHook('onSend', async (req, _reply, payload) => {
    const userId = req.auth?.userId;
    if (userId === undefined) return payload;
    if (typeof payload === 'string') cost.countEgress(userId, Buffer.byteLength(payload));
    else if (payload instanceof Uint8Array) cost.countEgress(userId, payload.byteLength);
    else if (payload instanceof Readable) {
      const counter = new PassThrough();
      counter.on('data', (chunk: Buffer) => cost.countEgress(userId, chunk.byteLength));
      payload.on('error', (e) => counter.destroy(e));
      return payload.pipe(counter);
    }
    return payload;
  });
  route(
    {
      method: 'GET',
      url: '/v1/cost',
      summary:
        "This month's bill (USD) so far and projected — storage, requests, transfer, egress — for the caller's user and the whole proxy, with the bytes held per tier over 30 days",
      auth: 'device',
      response: CostResponse,
    },
    async (req) => cost.report(auth(req).userId),
  );
}
