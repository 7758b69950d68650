/**
 * The proxy instances sharing this server's database (cluster/registry.ts; docs/deployment.md):
 * the live list for devices, and the operator's drain / activate (admin token).
 */
import { ClusterInstanceChange, ClusterInstancesResponse, type ClusterInstance } from '@weft/wire';
import { bearer } from '../auth.ts';
import { ApiError } from '../errors.ts';
import type { InstanceRegistry, InstanceRow, InstanceState } from '../cluster/registry.ts';
import type { RouteContext } from './route.ts';

const view = (r: InstanceRow, selfId: string): ClusterInstance => ({
  id: r.id,
  url: r.url,
  state: r.state,
  availableBps: r.availableBps,
  measuredBps: r.measuredBps,
  lastSeenMs: r.heartbeatMs,
  self: r.id === selfId,
});

/** An instance id as the registry writes them (config instanceId, supervisor ids). */
const INSTANCE_ID = /^[A-Za-z0-9._-]{1,128}$/;

export function registerClusterRoutes(
  ctx: RouteContext,
  registry: InstanceRegistry,
  requireAdmin: (token: string | undefined) => void,
): void {
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
      return {
        instances: registry.instances().map((r) => view(r, registry.id)),
        controller: registry.controller(),
        preferred: registry.preferred().id,
      };
    },
  );

  const change = (state: InstanceState, verb: string, summary: string): void =>
    route(
      {
        method: 'POST',
        url: `/v1/admin/cluster/instances/:id/${verb}`,
        summary,
        auth: 'admin',
        response: ClusterInstanceChange,
      },
      async (req): Promise<ClusterInstanceChange> => {
        requireAdmin(bearer(req.headers.authorization));
        const { id } = req.params as { id: string };
        if (!INSTANCE_ID.test(id))
          throw new ApiError('BAD_REQUEST', `not an instance id: ${JSON.stringify(id)}`);
        const r = await registry.setState(id, state);
        if (!r) throw new ApiError('NOT_FOUND', `no live instance ${id}`);
        return { instance: view(r.row, registry.id), changed: r.changed };
      },
    );
  change(
    'draining',
    'drain',
    'Drain a live instance (admin): it is no longer steered new transfers and finishes the ones it has (the instance learns at its next heartbeat); 404 when no live instance has that id',
  );
  change(
    'active',
    'activate',
    'Make a draining instance active again (admin): new transfers may be steered to it; 404 when no live instance has that id',
  );
}
