/** Routes outside the API: liveness, Prometheus metrics and the OpenAPI document. */
import { HealthResponse } from '@weft/wire';
import type { ProxyMetrics } from '../metrics.ts';
import type { OpScheduler } from '../scheduler.ts';
import { SERVER_VERSION } from '../version.ts';
import { openApi } from './openapi.ts';
import type { RouteContext, RouteDoc } from './route.ts';

export function registerSystemRoutes(
  ctx: RouteContext,
  deps: { metrics: ProxyMetrics; scheduler: OpScheduler; docs: readonly RouteDoc[] },
): void {
  const { route } = ctx;
  const { metrics, scheduler, docs } = deps;
  route(
    { method: 'GET', url: '/healthz', summary: 'Liveness', auth: 'none', response: HealthResponse },
    async () => ({ status: 'ok', version: SERVER_VERSION }),
  );
  route(
    {
      method: 'GET',
      url: '/metrics',
      summary: 'Prometheus metrics',
      auth: 'none',
      binaryResponse: 'text/plain',
    },
    async (_req, reply) => {
      metrics.queueDepth.set(scheduler.depth);
      void reply.header('content-type', metrics.registry.contentType);
      return metrics.registry.metrics();
    },
  );
  route({ method: 'GET', url: '/openapi.json', summary: 'This document', auth: 'none' }, async () =>
    openApi(docs),
  );
}
