/**
 * Selective sync for the UI API (getSelectiveSync / setSelectiveSync): the engine's folder
 * choices (selective-sync.ts) as the contract's SelectiveSync view. Bad input (a path that
 * cannot be a folder of the storage) is a `bad-request` and changes nothing.
 */
import { ApiError, type SelectiveSync } from '@weft/ui-contract';
import type { Engine } from '../engine.ts';
import { SelectionError } from '../selection.ts';

/** The view of `parent`'s folders; not available before this computer is enrolled. */
export async function selectiveView(
  engine: Engine | undefined,
  parent: string,
  noSession: string,
): Promise<SelectiveSync> {
  if (!engine)
    return { available: false, reason: noSession, parent, folders: [], excluded: [], offline: false };
  const sel = engine.selective;
  let listed: Awaited<ReturnType<typeof sel.folders>>;
  try {
    listed = await sel.folders(parent);
  } catch (e) {
    throw new ApiError(
      'failed',
      `cannot list ${parent === '' ? 'the folders' : JSON.stringify(parent)}: ${(e as Error).message}`,
    );
  }
  return {
    available: true,
    parent,
    folders: listed.folders.map((f) => ({ ...f })),
    excluded: sel.current.entries().map(([path, state]) => ({ path, state })),
    offline: listed.offline,
  };
}

/** Apply the person's choice at once; the view of `parent` after it. */
export async function applySelection(
  engine: Engine | undefined,
  excluded: readonly string[],
  parent: string,
  noSession: string,
): Promise<SelectiveSync> {
  if (!engine) throw new ApiError('unavailable', noSession);
  try {
    engine.setExcludedFolders(excluded);
  } catch (e) {
    if (e instanceof SelectionError) throw new ApiError('bad-request', e.message);
    throw e;
  }
  return selectiveView(engine, parent, noSession);
}
