/** The proxy instances sharing this server's database (cluster/registry.ts; docs/deployment.md). */
import { ClusterInstancesResponse } from '@weft/wire';
import type { InstanceRegistry } from '../cluster/registry.ts';
import type { RouteContext } from './route.ts';

export function registerClusterRoutes(ctx: RouteContext, registry: InstanceRegistry): void {
  const { route, auth } = ctx;
  route(
    {
      method: 'GET',
      url: '/v1/cluster/instances',
      summary:
        'The live proxy instances (one on SQLite), the controller, and the instance new transfers should go to (most available bandwidth)',
      auth: 'device',
      response: ClusterInstancesResponse,
    },
    async (req): Promise<ClusterInstancesResponse> => {
      auth(req);
      const all = registry.instances();
      return {
        instances: all.map((r) => ({
          id: r.id,
          url: r.url,
          state: r.state,
          availableBps: r.availableBps,
          measuredBps: r.measuredBps,
          lastSeenMs: r.heartbeatMs,
          self: r.id === registry.id,
        })),
        controller: registry.controller(),
        preferred: registry.preferred().id,
      };
    },
  );
}
