/**
 * A synced folder's own root on the server: the namespace seen from one folder down, so that
 * an engine syncing `~/Photos` against `.weft/folders/Photos` works with paths relative to
 * that root ('' = the root) and never sees anything outside it (docs/desktop.md, "Several
 * synced folders"). Every path going out gets the root in front; every path coming back has
 * it taken off; whatever lies outside the root is not there:
 *
 * - the feed keeps only changes under the root; a move into it from outside reads as a
 *   move from a path the engine never had (it fetches the destination, D21), a move out of
 *   it as the source's delete;
 * - bundles going up are decoded, their paths prefixed and encoded again (split in two when
 *   the longer paths would push one past MAX_BUNDLE_BYTES);
 * - the Merkle nodes of the consistency check are computed here from one recursive listing
 *   of the root, because the server's hashes include each entry's full path (wire/merkle.ts)
 *   and the engine's include its own, shorter ones.
 *
 * The primary folder keeps the whole namespace, without the `.weft` folder these roots live
 * in (`withoutFolderRoots`).
 */
import {
  type BundleEntry,
  type ChangeRecord,
  type EntryInfo,
  type FeedServerMessage,
  MAX_BUNDLE_BYTES,
  type MerkleNode,
  type OpResult,
  decodeBundle,
  dirHash,
  encodeBundle,
  fileLeafHash,
  orderChildren,
} from '@weft/wire';
import { filterChanges, selectiveRemote } from '../selective-remote.ts';
import { RemoteError } from './proxy-client.ts';
import type { RemoteStore } from './remote-store.ts';

/** The server folder that holds every additional synced folder's root (ignored by every engine). */
export const FOLDER_ROOTS_DIR = '.weft/folders';
/** Where a move from outside a root reads as coming from (no engine ever has a row there). */
const OUTSIDE = '.weft/outside';

/** The server root of an additional synced folder called `name` on the server. */
export function folderRoot(name: string): string {
  return `${FOLDER_ROOTS_DIR}/${name}`;
}

/** The namespace without the `.weft` folder (the primary folder's view). */
export function withoutFolderRoots(client: RemoteStore): RemoteStore {
  const hidden = (p: string): boolean => p === '.weft' || p.startsWith('.weft/');
  const view = { isExcluded: hidden, excludedRoots: () => ['.weft'], followMove: () => undefined };
  return selectiveRemote(client, () => view);
}

/** `client` seen from `root` down (see the module comment). */
export function scopedRemote(client: RemoteStore, root: string): RemoteStore {
  if (root === '' || root.startsWith('/') || root.endsWith('/')) throw new Error(`bad root ${root}`);
  const prefix = `${root}/`;
  const out = (p: string): string => (p === '' ? root : prefix + p);
  const inside = (p: string): boolean => p.startsWith(prefix);
  const back = (p: string): string => (inside(p) ? p.slice(prefix.length) : p === root ? '' : p);
  const entry = <T extends EntryInfo | undefined>(e: T): T => (e ? { ...e, path: back(e.path) } : e);
  const result = (r: OpResult): OpResult => {
    if (r.status === 'error') return r;
    const base = { ...r, ...(r.entry ? { entry: entry(r.entry) } : {}) };
    if (base.status !== 'conflict') return base;
    const c = base.conflict;
    return {
      ...base,
      conflict: { ...c, path: back(c.path), conflictPath: c.conflictPath ? back(c.conflictPath) : '' },
    };
  };
  const changes = (list: readonly ChangeRecord[]): ChangeRecord[] =>
    filterChanges(list, (p) => !inside(p)).map((c): ChangeRecord => {
      if (c.type === 'delete') return { ...c, path: back(c.path) };
      if (c.type === 'upsert') return { ...c, path: back(c.path), entry: entry(c.entry) };
      return {
        ...c,
        from: inside(c.from) ? back(c.from) : `${OUTSIDE}/${c.from}`,
        path: back(c.path),
        entry: entry(c.entry),
      };
    });
  const makeRoot = async (): Promise<void> => {
    const [made] = await client.ops([{ op: 'mkdir', path: root }]);
    if (made?.status === 'error') throw new RemoteError(409, made.error.code, made.error.message);
  };
  const upload = async (
    entries: readonly BundleEntry[],
    compress: boolean,
  ): Promise<{ path: string; result: OpResult }[]> => {
    const moved = entries.map((e) => ({ ...e, path: out(e.path) }));
    const bytes = encodeBundle(moved, { compress, maxBytes: Number.MAX_SAFE_INTEGER });
    if (bytes.byteLength <= MAX_BUNDLE_BYTES || entries.length < 2)
      return (await client.uploadBundle(bytes)).map((r) => ({
        path: back(r.path),
        result: result(r.result),
      }));
    const half = Math.ceil(entries.length / 2);
    const first = await upload(entries.slice(0, half), compress);
    return [...first, ...(await upload(entries.slice(half), compress))];
  };

  const view: RemoteStore = {
    list: async (path = '', recursive = true) => {
      let r;
      try {
        r = await client.list(out(path), recursive);
      } catch (e) {
        // The root is made on first use (mkdir makes the folders above it, and is idempotent).
        if (path !== '' || !(e instanceof RemoteError && e.code === 'NOT_FOUND')) throw e;
        await makeRoot();
        r = await client.list(root, recursive);
      }
      return { ...r, entries: r.entries.filter((e) => inside(e.path)).map(entry) };
    },
    stat: async (path) => entry(await client.stat(out(path))),
    download: (path, range, signal) => client.download(out(path), range, signal),
    ops: async (ops) =>
      (
        await client.ops(
          ops.map((o) =>
            o.op === 'move' || o.op === 'copy'
              ? { ...o, from: out(o.from), to: out(o.to) }
              : { ...o, path: out(o.path) },
          ),
        )
      ).map(result),
    uploadBundle: async (bytes) => {
      const decoded = decodeBundle(bytes, { verifyHashes: false });
      return upload(decoded.entries, decoded.compressed);
    },
    downloadBundle: async (paths, compress) => {
      const r = await client.downloadBundle(paths.map(out), compress);
      return {
        bundle: { ...r.bundle, entries: r.bundle.entries.map((e) => ({ ...e, path: back(e.path) })) },
        deferred: r.deferred.map((d) => ({ ...d, path: back(d.path) })),
      };
    },
    createTransfer: async (req) => {
      const t = await client.createTransfer({ ...req, path: out(req.path) });
      return { ...t, path: back(t.path) };
    },
    getTransfer: async (id) => {
      const t = await client.getTransfer(id);
      return t ? { ...t, path: back(t.path) } : undefined;
    },
    putBlock: (id, frame) => client.putBlock(id, frame),
    uploadDelta: async (path, base, mtimeMs, container, own) =>
      result(await client.uploadDelta(out(path), base, mtimeMs, container, own)),
    downloadDelta: (path, base, signature) => client.downloadDelta(out(path), base, signature),
    signature: (path) => client.signature(out(path)),
    changes: async (cursor, limit) => {
      const r = await client.changes(cursor, limit);
      return { ...r, changes: changes(r.changes) };
    },
    // One listing of the root (made again if it is gone, as for the engine's own listing).
    merkle: async (paths) => merkleOf((await view.list('', true)).entries, paths),
    openFeed: (cursor, onMessage, onClose) =>
      client.openFeed(
        cursor,
        (m: FeedServerMessage) => onMessage(m.type === 'changes' ? { ...m, changes: changes(m.changes) } : m),
        onClose,
      ),
  };
  if (client.usage) view.usage = () => (client.usage as NonNullable<RemoteStore['usage']>).call(client);
  if (client.serverDelta)
    view.serverDelta = (path, base) =>
      (client.serverDelta as NonNullable<RemoteStore['serverDelta']>).call(client, out(path), base);
  if (client.listPage) {
    const listPage = client.listPage;
    view.listPage = async (path, page) => {
      const ask = (): ReturnType<typeof listPage> =>
        listPage.call(client, out(path), {
          ...page,
          ...(page.after === undefined ? {} : { after: out(page.after) }),
        });
      let r;
      try {
        r = await ask();
      } catch (e) {
        // The root is made on first use, as for the whole listing.
        const first = page.after === undefined;
        if (path !== '' || !first || !(e instanceof RemoteError && e.code === 'NOT_FOUND')) throw e;
        await makeRoot();
        r = await ask();
      }
      const entries = r.entries.filter((e) => inside(e.path)).map(entry);
      return { ...r, entries, ...(r.next === undefined ? {} : { next: back(r.next) }) };
    };
  }
  return view;
}

/**
 * Merkle nodes (wire/merkle.ts) for `paths` over a listing whose paths are already relative
 * to the root: what the server would answer if the root were its namespace.
 */
export function merkleOf(entries: readonly EntryInfo[], paths: readonly string[]): MerkleNode[] {
  const byPath = new Map(entries.map((e) => [e.path, e]));
  const children = new Map<string, EntryInfo[]>();
  for (const e of entries) {
    const slash = e.path.lastIndexOf('/');
    const parent = slash < 0 ? '' : e.path.slice(0, slash);
    const list = children.get(parent) ?? [];
    list.push(e);
    children.set(parent, list);
  }
  const name = (p: string): string => p.slice(p.lastIndexOf('/') + 1);
  const hashes = new Map<string, Uint8Array>();
  const hashOf = (e: Pick<EntryInfo, 'path' | 'kind' | 'sha256'>): Uint8Array => {
    const known = hashes.get(e.path);
    if (known) return known;
    const h =
      e.kind === 'file'
        ? fileLeafHash(e.path, e.sha256 ?? '')
        : dirHash(
            e.path,
            (children.get(e.path) ?? []).map((c) => ({ name: name(c.path), kind: c.kind, hash: hashOf(c) })),
          );
    hashes.set(e.path, h);
    return h;
  };
  const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
  return paths.map((p): MerkleNode => {
    const e = p === '' ? { path: '', kind: 'dir' as const } : byPath.get(p);
    if (!e) return { path: p };
    if (e.kind === 'file') return { path: p, kind: 'file', hash: hex(hashOf(e)) };
    return {
      path: p,
      kind: 'dir',
      hash: hex(hashOf(e)),
      children: orderChildren(
        (children.get(p) ?? []).map((c) => ({ name: name(c.path), kind: c.kind, hash: hex(hashOf(c)) })),
      ),
    };
  });
}
