/**
 * The Storage health screen's side of the agent (docs/desktop.md "Storage health",
 * issue #17): the proxy's `GET /v1/storage/health` as the UI contract shapes it — the
 * backends of a redundant object tier with their class and state, this user's files by
 * redundancy left, and what one more backend failure would do to them.
 */
import type { ApiHandlers } from '@weft/ui-contract';
import { OfflineError, RemoteError } from '../remote/proxy-client.ts';
import type { UiSession } from './service.ts';

const NO_SESSION = 'Connect Weft storage first (Accounts).';

function why(e: unknown): string {
  if (e instanceof OfflineError) return 'Cannot reach the Weft server.';
  if (e instanceof RemoteError && e.status === 404) return 'This Weft server does not report storage health.';
  return e instanceof Error ? e.message : String(e);
}

export function storageHealthHandlers(o: {
  session: () => UiSession | undefined;
}): Pick<ApiHandlers, 'getStorageHealth'> {
  return {
    getStorageHealth: async () => {
      const s = o.session();
      if (!s) return { available: false, reason: NO_SESSION };
      try {
        const h = await s.client.storageHealth();
        if (!h.redundant) return { available: true, redundant: false };
        return {
          available: true,
          redundant: true,
          state: h.state,
          backends: h.backends.map((b) => ({
            id: b.id,
            class: b.class,
            state: b.state,
            ...(b.since === undefined ? {} : { sinceMs: b.since }),
          })),
          files: h.files,
          ifFails: h.ifFails,
          ...(h.lastScrubMs === undefined ? {} : { lastScrubMs: h.lastScrubMs }),
          checkedAtMs: h.checkedAtMs,
        };
      } catch (e) {
        return { available: false, reason: why(e) };
      }
    },
  };
}
