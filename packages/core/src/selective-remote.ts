/**
 * Selective sync, remote side: the server as this device's discovery sees it — without the
 * folders left out here (selection.ts, state `excluded`). Remote discovery then needs no
 * checks of its own: nothing under a left-out folder is listed, stat-ed or announced, so
 * nothing there is downloaded, and the journal never learns of it.
 *
 * The feed: a change under a left-out folder is dropped; a move out of one reads as the
 * destination appearing (the engine fetches it, D21); a move into one reads as the source's
 * delete here — its local copy goes to the trash, nothing is sent to the server; a folder
 * left out moves with its parent (and a left-out folder renamed stays left out).
 * The consistency check's Merkle nodes are recomputed without the left-out folders, so that
 * a folder this device does not hold is not a difference to repair.
 * Writes (ops, uploads) pass through: local discovery never produces one under a left-out
 * folder (the scanner treats it as ignored).
 */
import {
  type ChangeRecord,
  type ChangesResponse,
  type EntryInfo,
  type ListResponse,
  type MerkleNode,
  dirHash,
} from '@weft/wire';
import type { RemoteStore } from './remote/remote-store.ts';

/** What the view asks of the selection (selective-sync.ts implements it). */
export interface SelectionView {
  /** Not on this device: under a left-out folder whose local copy is gone. */
  isExcluded(path: string): boolean;
  /** Those left-out folders themselves (for the Merkle view). */
  excludedRoots(): readonly string[];
  /** A folder moved on the server (or here): the choices inside it follow it. */
  followMove(from: string, to: string): void;
}

/** `client` seen without the folders `selection()` leaves out (asked on every call). */
export function selectiveRemote(client: RemoteStore, selection: () => SelectionView): RemoteStore {
  const excluded = (p: string): boolean => selection().isExcluded(p);
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
      const s = selection();
      return { ...r, changes: filterChanges(r.changes, excluded, (from, to) => s.followMove(from, to)) };
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
    merkle: async (paths) => merkleWithout(client, paths, excluded, selection().excludedRoots()),
    openFeed: (...a) => client.openFeed(...a),
  };
  if (client.listPage) {
    // Entries left out, `next` kept: it is where the server's page ended, whatever is shown.
    view.listPage = async (path, page) => {
      const r = await (client.listPage as NonNullable<RemoteStore['listPage']>).call(client, path, page);
      if (path !== '' && excluded(path)) return { ...r, entries: [] };
      return { ...r, entries: r.entries.filter((e) => !excluded(e.path)) };
    };
  }
  if (client.usage) view.usage = () => (client.usage as NonNullable<RemoteStore['usage']>).call(client);
  if (client.serverDelta)
    view.serverDelta = (path, base) =>
      (client.serverDelta as NonNullable<RemoteStore['serverDelta']>).call(client, path, base);
  return view;
}

/**
 * The feed as seen without the left-out paths (see the module comment). A move is first
 * told to `onMove` (the choices inside the moved folder follow it: a left-out folder whose
 * parent was renamed stays left out), then filtered with the choices as they are after it.
 */
export function filterChanges(
  changes: readonly ChangeRecord[],
  excluded: (path: string) => boolean,
  onMove: (from: string, to: string) => void = () => undefined,
): ChangeRecord[] {
  const out: ChangeRecord[] = [];
  for (const c of changes) {
    if (c.type !== 'move') {
      if (!excluded(c.path)) out.push(c);
      continue;
    }
    onMove(c.from, c.path);
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

/**
 * The server's Merkle nodes for `paths` as if the left-out folders were not there: a node
 * inside one is absent; a folder above one gets its children and hash recomputed without it
 * (asking the server for the folders on the way down, one request per level).
 */
export async function merkleWithout(
  client: Pick<RemoteStore, 'merkle'>,
  paths: readonly string[],
  excluded: (path: string) => boolean,
  roots: readonly string[],
): Promise<MerkleNode[]> {
  const nodes = await client.merkle(paths);
  if (roots.length === 0) return nodes;
  const holds = (p: string): boolean => roots.some((x) => p === '' || x.startsWith(p + '/'));
  const known = new Map<string, MerkleNode>();
  const view = async (n: MerkleNode): Promise<MerkleNode> => {
    if (n.path !== '' && excluded(n.path)) return { path: n.path };
    if (n.kind !== 'dir' || !holds(n.path)) return n;
    const at = (name: string): string => (n.path === '' ? name : `${n.path}/${name}`);
    const children = (n.children ?? []).filter((c) => !excluded(at(c.name)));
    const deeper = children.filter((c) => c.kind === 'dir' && holds(at(c.name))).map((c) => at(c.name));
    const missing = deeper.filter((p) => !known.has(p));
    if (missing.length > 0) for (const m of await client.merkle(missing)) known.set(m.path, m);
    const kept = [];
    for (const c of children) {
      const below = known.get(at(c.name));
      kept.push(
        deeper.includes(at(c.name)) && below ? { ...c, hash: (await view(below)).hash ?? c.hash } : c,
      );
    }
    const hash = Buffer.from(
      dirHash(
        n.path,
        kept.map((c) => ({ name: c.name, kind: c.kind, hash: Buffer.from(c.hash, 'hex') })),
      ),
    ).toString('hex');
    return { ...n, hash, children: kept };
  };
  const out: MerkleNode[] = [];
  for (const n of nodes) out.push(await view(n));
  return out;
}
