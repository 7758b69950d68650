/**
 * Selective sync, remote side: the server as this device's discovery sees it — without the
 * folders left out here (selection.ts, state `excluded`). Remote discovery then needs no
 * checks of its own: nothing under a left-out folder is listed, stat-ed or announced, so
 * nothing there is downloaded, and the journal never learns of it.
 *
 * The feed: a change under a left-out folder is dropped; a move out of one reads as the
 * destination appearing (the engine fetches it, D21); a move into one reads as the source's
 * delete here — its local copy goes to the trash, nothing is sent to the server.
 * Writes (ops, uploads) pass through: local discovery never produces one under a left-out
 * folder (the scanner treats it as ignored).
 */
import type { ChangeRecord, ChangesResponse, EntryInfo, ListResponse } from '@weft/wire';
import type { RemoteStore } from './remote/remote-store.ts';

/** `client` seen without the paths `excluded` answers true for (checked on every call). */
export function selectiveRemote(client: RemoteStore, excluded: (path: string) => boolean): RemoteStore {
  const view: RemoteStore = {
    list: async (path = '', recursive = true): Promise<ListResponse> => {
      const r = await client.list(path, recursive);
      if (path !== '' && excluded(path)) return { entries: [], seq: r.seq };
      return { ...r, entries: r.entries.filter((e) => !excluded(e.path)) };
    },
    stat: async (path: string): Promise<EntryInfo | undefined> =>
      excluded(path) ? undefined : client.stat(path),
    changes: async (cursor: number, limit?: number): Promise<ChangesResponse> => {
      const r = await client.changes(cursor, limit);
      return { ...r, changes: filterChanges(r.changes, excluded) };
    },
    download: (...a) => client.download(...a),
    ops: (...a) => client.ops(...a),
    uploadBundle: (...a) => client.uploadBundle(...a),
    downloadBundle: (...a) => client.downloadBundle(...a),
    createTransfer: (...a) => client.createTransfer(...a),
    getTransfer: (...a) => client.getTransfer(...a),
    putBlock: (...a) => client.putBlock(...a),
    uploadDelta: (...a) => client.uploadDelta(...a),
    downloadDelta: (...a) => client.downloadDelta(...a),
    signature: (...a) => client.signature(...a),
    merkle: (...a) => client.merkle(...a),
    openFeed: (...a) => client.openFeed(...a),
  };
  if (client.usage) view.usage = () => (client.usage as NonNullable<RemoteStore['usage']>).call(client);
  return view;
}

/** The feed as seen without the left-out paths (see the module comment). */
export function filterChanges(
  changes: readonly ChangeRecord[],
  excluded: (path: string) => boolean,
): ChangeRecord[] {
  const out: ChangeRecord[] = [];
  for (const c of changes) {
    if (c.type !== 'move') {
      if (!excluded(c.path)) out.push(c);
      continue;
    }
    const fromOut = excluded(c.from);
    const toOut = excluded(c.path);
    if (!toOut)
      out.push(c); // from a left-out folder: the engine has no row there and fetches it
    else if (!fromOut) {
      const del: ChangeRecord = { seq: c.seq, type: 'delete', path: c.from };
      if (c.device !== undefined) del.device = c.device;
      if (c.deviceName !== undefined) del.deviceName = c.deviceName;
      out.push(del);
    }
  }
  return out;
}
