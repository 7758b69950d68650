/**
 * One pass of the engine (engine.ts runs them one at a time): pull the remote changes
 * (discovery/remote.ts, then the consistency check when one is due), scan the dirty local
 * subtrees (discovery/local.ts), push the queue (push.ts) — what the pull held back while a
 * move of ours waited (discovery/held.ts) comes in before and after the push, once no queued
 * move touches it — and say where things stand. Offline, the
 * scan still runs — edits are queued and coalesced until the server is back — and the
 * pass then fails with the OfflineError, for the loop to retry.
 */
import type { EngineOptions } from '../engine-options.ts';
import { OfflineError } from '../remote/proxy-client.ts';
import type { SelectiveSync } from '../selective-sync.ts';
import type { StorageWatch } from '../storage-usage.ts';
import type { SyncContext } from './context.ts';
import { discoverLocal } from './discovery/local.ts';
import { pull, releaseHeld, runConsistencyCheck } from './discovery/remote.ts';
import { runIdleEstimates } from './idle-estimates.ts';
import { EarlyPush } from './early-push.ts';
import { push } from './push.ts';

export interface ConsistencyOutcome {
  readonly paths: string[];
  readonly roundTrips: number;
  readonly repaired: number;
  readonly atMs: number;
}

/** What the loop keeps between passes. */
export interface PassState {
  /** Local subtrees to scan. */
  readonly pendingScope: Set<string>;
  /** The remote side may have changed: pull. */
  remoteDirty: boolean;
  /** Run the Merkle consistency check after the next successful pull (crash, long outage). */
  checkPending: boolean;
  offlineSince: number | undefined;
  /** The outcome of the last consistency check (for tests and the status UI). */
  lastCheck: ConsistencyOutcome | undefined;
  /** The scan found a mass delete: the folder waits for the person's answer. */
  massDeletePending: boolean;
}

/** A new engine's: scan everything, pull. */
export function initialPassState(): PassState {
  return {
    pendingScope: new Set<string>(['']),
    remoteDirty: true,
    checkPending: false,
    offlineSince: undefined,
    lastCheck: undefined,
    massDeletePending: false,
  };
}

/** What the pass asks the loop. */
export interface PassEnv {
  readonly options: EngineOptions;
  readonly storage: StorageWatch;
  readonly selective: SelectiveSync;
  readonly paused: () => boolean;
  readonly stopped: () => boolean;
  /** Another pass is already asked for (the idle-time estimates then wait). */
  readonly again: () => boolean;
}

export async function runPass(ctx: SyncContext, state: PassState, env: PassEnv): Promise<void> {
  const { options } = env;
  if (env.paused()) {
    ctx.status.update({ state: 'paused' });
    return;
  }
  const now = options.now ?? Date.now;
  let offline: OfflineError | undefined;
  if (state.remoteDirty) {
    state.remoteDirty = false;
    try {
      await pull(ctx);
      await env.selective.afterPull();
      if (
        state.offlineSince !== undefined &&
        now() - state.offlineSince >= (options.longDisconnectMs ?? 600_000)
      )
        state.checkPending = true;
      state.offlineSince = undefined;
      if (state.checkPending) {
        state.checkPending = false;
        state.lastCheck = await runConsistencyCheck(ctx);
      }
    } catch (e) {
      if (!(e instanceof OfflineError)) throw e;
      state.remoteDirty = true;
      state.offlineSince ??= now();
      offline = e;
    }
  }
  if (state.pendingScope.size > 0) await env.selective.beforeScan([...state.pendingScope]);
  const scope = [...state.pendingScope];
  state.pendingScope.clear();
  const control = { paused: env.paused, stopped: env.stopped, storageFull: () => env.storage.isFull };
  if (scope.length > 0) {
    // Sending starts while the scan goes on, when nothing else waits (early-push.ts).
    const early = EarlyPush.forScan(ctx, control, offline === undefined);
    let found: Awaited<ReturnType<typeof discoverLocal>>;
    try {
      found = await discoverLocal(
        ctx,
        scope,
        {
          folder: options.folder,
          settleMs: options.settleMs ?? 1000,
          massDeleteFraction: options.massDeleteFraction ?? 0.5,
          massDeleteCount: options.massDeleteCount ?? 1000,
          stopped: env.stopped,
        },
        early,
      );
    } catch (e) {
      await early?.finish(true).catch(() => undefined); // never two pushes at once
      throw e;
    }
    // The scan is over; a push beside it sends the rest of the queue before the pass goes on.
    if (found === 'queued' && early?.started) ctx.status.update({ state: 'syncing' });
    await early?.finish(found !== 'queued');
    if (found === 'stopped') return; // the next scan finds the rest
    if (found === 'mass-delete') {
      state.massDeletePending = true;
      return;
    }
  }
  if (offline) throw offline;
  // Held remote changes no queued move touches now (the scan may have merged a move into a
  // delete) come in before the push, so what they bring is known to the operations sent.
  await releaseHeld(ctx);
  await push(ctx, control);
  await env.selective.afterPush();
  await releaseHeld(ctx);
  if (!env.again()) await runIdleEstimates(ctx, () => env.again() || env.stopped());
  const pending = ctx.journal.pendingCount();
  const full = env.storage.isFull;
  ctx.status.update({
    // A remote change announced during this pass is known but not applied yet.
    state: full ? 'full' : state.remoteDirty ? 'syncing' : 'idle',
    error: full ? env.storage.message(pending) : undefined,
    pendingOperations: pending,
    files: ctx.journal.fileCount(),
  });
}
