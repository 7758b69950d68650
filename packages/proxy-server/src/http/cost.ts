/** `GET /v1/cost` (docs/cost.md) and the egress count of every response, per user. */
import { CostResponse } from '@weft/wire';
import type { CostService } from '../cost/service.ts';
import type { RouteContext } from './route.ts';

export function registerCostRoutes(ctx: RouteContext, cost: CostService): void {
  const { app, route, auth } = ctx;
  // What the proxy sends to a client is egress, billed per GB on the tier it runs on.
  app.addHook('onResponse', async (req, reply) => {
    const out = Number(reply.getHeader('content-length') ?? 0);
    if (out > 0 && req.auth) cost.countEgress(req.auth.userId, out);
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
