/**
 * What a failed pass means (engine.ts asks after every pass that threw): the server refused
 * this device (401: removed, nothing more is tried), Weft storage is full (the pass runs once
 * more at once without uploads, then the folder shows `full` and waits for room), the server
 * cannot be reached (`offline`, retried on Weft's backoff), or any other error (`error`,
 * retried likewise). The status says which.
 */
import { OfflineError, RemoteError } from '../remote/proxy-client.ts';
import type { StatusModel } from '../status.ts';
import { type StorageWatch, isQuotaExceeded } from '../storage-usage.ts';
import type { RemoteLink } from './remote-link.ts';

/** What the loop does next: run another pass at once, or stop until woken. */
export type AfterFailure = 'again' | 'stop';

export interface FailureEnv {
  readonly status: StatusModel;
  readonly storage: StorageWatch;
  readonly link: RemoteLink;
  /** How many operations wait (for the `full` message). */
  readonly pending: () => number;
}

export function passFailed(e: unknown, env: FailureEnv): AfterFailure {
  if (e instanceof RemoteError && e.status === 401) {
    env.link.halt(e.code);
    return 'stop';
  }
  if (isQuotaExceeded(e)) {
    // Uploads wait (queued) and are not sent again until usage shows room; the pass runs
    // again at once without them (deletes free space).
    const first = !env.storage.isFull;
    env.storage.refused(e);
    if (first) return 'again';
    showFull(env);
    return 'stop';
  }
  const offline = e instanceof OfflineError;
  env.status.update({ state: offline ? 'offline' : 'error', error: (e as Error).message });
  env.link.retryLater();
  return 'stop';
}

/** Weft storage is full: say so; only downloads stay listed as transfers. */
export function showFull(env: FailureEnv): void {
  env.status.update({
    state: 'full',
    error: env.storage.message(env.pending()),
    transfers: env.status.get().transfers.filter((t) => t.direction === 'down'),
  });
}

/** The server refused this device's token: say why; no transfer goes on. */
export function showRemoved(status: StatusModel, link: RemoteLink): void {
  status.update({ state: 'removed', error: link.message, transfers: [] });
}
