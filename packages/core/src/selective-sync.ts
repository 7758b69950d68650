/**
 * Selective sync, the engine's side (the states are explained in selection.ts; the person's
 * view in docs/desktop.md, "Choose folders"). The engine calls it at three points of a pass:
 *
 * - after the pull: folders selected again (`including`) are downloaded;
 * - before the local scan: something made here at the place of an `excluded` folder is
 *   renamed "<name> (selective sync conflict)" and synced under that name (as Dropbox
 *   does) — never merged into the server's folder, never left unsynced; a `leaving` folder
 *   deleted here by hand is `excluded` at once (its absence is not a delete for the server);
 * - after the push: a `leaving` folder whose local changes are all uploaded loses its local
 *   copy (freeing the space) and becomes `excluded`. Nothing is deleted on the server.
 *
 * Removing a local copy is all or nothing for the scanner: every file is first checked to be
 * exactly what was last synced (content hash), then the journal forgets the rows and marks
 * the folder `excluded` in one transaction, then the folder is renamed away at once to a
 * hidden temporary name and deleted. A file changed between the check and the rename is
 * caught by comparing stats afterwards: the whole folder is then kept as a selective-sync
 * conflict. Files the ignore rules match (`.DS_Store`, `*.tmp`, …), and names Weft cannot
 * send, were never synced: they go to the local trash, not away.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { loadSelection, replaceSelection, setSelectionState } from './journal/selection-rows.ts';
import { PARTIAL_PREFIX } from './local-fs.ts';
import { UnsafeLocalPathError } from './local-path.ts';
import { OfflineError } from './remote/proxy-client.ts';
import type { RemoteStore } from './remote/remote-store.ts';
import type { SelectionView } from './selective-remote.ts';
import { Selection, type SelectionState, planSelection, selfOrAncestor } from './selection.ts';
import type { SyncContext } from './sync/context.ts';
import { fetchRemoteSubtree } from './sync/discovery/remote.ts';

export const CONFLICT_SUFFIX = ' (selective sync conflict)';

/** One folder as Settings shows it: the server's folders, each kept here or not. */
export interface FolderChoice {
  readonly path: string;
  readonly name: string;
  /** Kept on this device (not under a left-out folder). */
  readonly selected: boolean;
  /** The state of a folder left out (or being downloaded again) by its own entry. */
  readonly state?: SelectionState;
}

interface Snapshot {
  size: number;
  mtimeNs: bigint;
  ino: bigint;
}

export class SelectiveSync implements SelectionView {
  private selection: Selection;
  /** Removals waiting to be tried again, per folder (see `later`). */
  private readonly retries = new Map<string, { n: number; timer: NodeJS.Timeout | undefined }>();
  /** Folders renamed away by a removal a crash interrupted were looked for (once a run). */
  private sweptHeld = false;

  constructor(
    private readonly ctx: SyncContext,
    /** The server as it is (the UI lists left-out folders too). */
    private readonly rawClient: RemoteStore,
    private readonly settleMs: number,
  ) {
    this.selection = new Selection(loadSelection(this.ctx.journal));
    ctx.ignore.setExcluded((p) => this.selection.isExcluded(p));
  }

  /** Not synced at all here (under an `excluded` folder). */
  isExcluded(p: string): boolean {
    return this.selection.isExcluded(p);
  }

  get current(): Selection {
    return this.selection;
  }

  excludedRoots(): readonly string[] {
    return this.selection.inState('excluded');
  }

  /**
   * `from` was moved to `to` (on the server, or here and echoed by the feed): the choices at
   * or inside it follow. One that lands inside another left-out folder is dropped (that one
   * covers it). Persisted at once.
   */
  followMove(from: string, to: string): void {
    const entries = this.selection.entries();
    const within = (p: string, q: string): boolean => p === q || p.startsWith(q + '/');
    if (from === to || !entries.some(([p]) => within(p, from))) return;
    const moved = new Map<string, SelectionState>();
    for (const [p, s] of entries) moved.set(within(p, from) ? to + p.slice(from.length) : p, s);
    const out = (s: SelectionState | undefined): boolean => s === 'leaving' || s === 'excluded';
    for (const p of [...moved.keys()]) {
      const parent = p.includes('/') ? p.slice(0, p.lastIndexOf('/')) : '';
      const cover = parent === '' ? undefined : selfOrAncestor(parent, (q) => out(moved.get(q)));
      if (cover !== undefined) moved.delete(p);
    }
    this.replaceAll(moved);
  }

  /**
   * Leave out exactly `requested` (folder paths; throws SelectionError for bad input, nothing
   * changed). Persisted at once. Returns the folders whose local state must be looked at again.
   */
  set(requested: readonly unknown[]): string[] {
    const before = new Map(this.selection.entries());
    const next = planSelection(before, requested as readonly string[]);
    this.replaceAll(next);
    this.forgetRetries();
    const touched = new Set<string>();
    for (const [p, s] of next) if (before.get(p) !== s) touched.add(p);
    for (const p of before.keys()) if (!next.has(p)) touched.add(p);
    return [...touched].sort();
  }

  /** Download the folders selected again (state `including`). */
  async afterPull(): Promise<void> {
    for (const p of this.selection.inState('including')) {
      await this.ctx.guarded(p, () => fetchRemoteSubtree(this.ctx, p));
      this.setState(p, undefined);
      this.ctx.markDirty([p]);
    }
  }

  /**
   * Before a scan of `scope`: what is on disk at the place of an `excluded` folder was made
   * here after it was left out; rename it to a selective-sync conflict name, and return the
   * new paths (to be scanned and uploaded).
   */
  async beforeScan(scope: readonly string[]): Promise<string[]> {
    const related = (x: string): boolean =>
      scope.some((s) => s === '' || s === x || x.startsWith(s + '/') || s.startsWith(x + '/'));
    const out: string[] = [];
    for (const x of this.selection.inState('excluded')) {
      if (!related(x)) continue;
      const abs = await this.ctx.at(x).catch(() => undefined);
      if (abs === undefined) continue;
      if ((await fsp.lstat(abs).catch(() => undefined)) === undefined) continue;
      const renamed = await this.conflictRename(x, abs);
      if (renamed !== undefined) out.push(renamed);
    }
    // A folder being left out that is gone from this disk (the person deleted it to free the
    // space sooner) is left out now: its absence is not a delete to send to the server.
    for (const x of this.selection.inState('leaving')) {
      if (!related(x)) continue;
      const abs = await this.ctx.at(x).catch(() => undefined);
      if (abs !== undefined && (await fsp.lstat(abs).catch(() => undefined)) !== undefined) continue;
      await this.evict(x);
    }
    return out;
  }

  /** After the push: a `leaving` folder with nothing left to upload goes from this disk. */
  async afterPush(): Promise<void> {
    if (!this.sweptHeld) await this.sweepHeld();
    const leaving = this.selection.inState('leaving');
    if (leaving.length === 0) return;
    const busy = this.ctx.journal
      .pendingOps()
      .flatMap(({ op }) => (op.kind === 'move' ? [op.from, op.to] : [op.path]));
    for (const x of leaving) {
      if (busy.some((q) => q === x || q.startsWith(x + '/'))) continue;
      await this.evict(x);
    }
  }

  /**
   * The server's folders directly under `parent` ('' = the top), each with whether it is kept
   * here. Offline, the folders the journal knows and the left-out ones are listed instead.
   */
  async folders(parent = ''): Promise<{ folders: FolderChoice[]; offline: boolean }> {
    let paths: string[];
    let offline = false;
    try {
      const r = await this.rawClient.list(parent, false);
      paths = r.entries.filter((e) => e.kind === 'dir').map((e) => e.path);
    } catch (e) {
      if (!(e instanceof OfflineError)) throw e;
      offline = true;
      const depth = parent === '' ? 0 : parent.split('/').length;
      const known = this.ctx.journal
        .filesUnder(parent)
        .filter((r) => r.kind === 'dir' && r.path !== parent)
        .map((r) => r.path);
      const mine = this.selection.entries().map(([p]) => p);
      paths = [...new Set([...known, ...mine])].filter(
        (p) => p.split('/').length === depth + 1 && (parent === '' || p.startsWith(parent + '/')),
      );
    }
    const folders = paths.sort().map((p): FolderChoice => {
      const state = this.selection.state(p);
      return {
        path: p,
        name: p.slice(p.lastIndexOf('/') + 1),
        selected: !this.selection.isDeselected(p),
        ...(state === undefined ? {} : { state }),
      };
    });
    return { folders, offline };
  }

  // ---------------------------------------------------------------- internals

  private replaceAll(next: ReadonlyMap<string, SelectionState>): void {
    replaceSelection(this.ctx.journal, next);
    this.selection = new Selection(next);
  }

  private setState(p: string, state: SelectionState | undefined): void {
    setSelectionState(this.ctx.journal, p, state);
    const next = new Map(this.selection.entries());
    if (state === undefined) next.delete(p);
    else next.set(p, state);
    this.selection = new Selection(next);
  }

  /**
   * A removal interrupted by a crash after its rename leaves a hidden
   * `.weft-partial-evict-*` folder beside the left-out one: it goes to the local trash
   * (a change made in the instant before the crash is kept there, not lost).
   */
  private async sweepHeld(): Promise<void> {
    this.sweptHeld = true;
    const parents = new Set<string>();
    for (const x of this.selection.inState('excluded'))
      parents.add(x.includes('/') ? x.slice(0, x.lastIndexOf('/')) : '');
    for (const parent of parents) {
      const abs = await this.ctx.at(parent, true).catch(() => undefined);
      if (abs === undefined) continue;
      for (const name of await fsp.readdir(abs).catch(() => [] as string[])) {
        if (!name.startsWith(`${PARTIAL_PREFIX}evict-`)) continue;
        // Named without the hidden prefix in the trash, where the person may look for it.
        const shown = name.slice(PARTIAL_PREFIX.length);
        const rel = parent === '' ? shown : `${this.ctx.paths.localRel(parent)}/${shown}`;
        await this.ctx.trash.keep(nodePath.join(abs, name), rel);
      }
    }
  }

  /** Try again later (a file not scanned yet, or still being written). */
  private later(x: string): void {
    // One timer per folder, waiting longer each time (up to a minute): a file that can never
    // be uploaded (a name clash, say) must not keep the engine busy every second.
    const r = this.retries.get(x) ?? { n: 0, timer: undefined };
    if (r.timer !== undefined) return;
    const delay = Math.min(Math.max(this.settleMs, 50) * 2 ** Math.min(r.n, 16), 60_000);
    r.n += 1;
    r.timer = setTimeout(() => {
      r.timer = undefined;
      this.ctx.markDirty([x]);
    }, delay);
    r.timer.unref();
    this.retries.set(x, r);
  }

  private forgetRetries(): void {
    for (const r of this.retries.values()) if (r.timer !== undefined) clearTimeout(r.timer);
    this.retries.clear();
  }

  private async evict(x: string): Promise<void> {
    const ctx = this.ctx;
    let abs: string;
    try {
      abs = await ctx.at(x);
    } catch (e) {
      if (!(e instanceof UnsafeLocalPathError)) throw e;
      abs = ''; // it cannot be on this disk: nothing to remove
    }
    const st = abs === '' ? undefined : await fsp.lstat(abs).catch(() => undefined);
    const rows = ctx.journal.filesUnder(x);
    // Every file the journal knows there must be here exactly as last synced.
    const expected = new Map<string, Snapshot>(); // local path relative to `abs`
    const expectedDirs = new Set<string>();
    if (st !== undefined) {
      for (const r of rows) {
        const rAbs = await ctx.at(r.path);
        const rel = nodePath.relative(abs, rAbs);
        if (r.kind === 'dir') {
          expectedDirs.add(rel);
          continue;
        }
        const fst = await fsp.lstat(rAbs, { bigint: true }).catch(() => undefined);
        const hash = fst?.isFile() ? await ctx.localHash(r, r.path) : undefined;
        if (fst === undefined || r.syncedRev === null || hash === undefined || hash !== r.syncedHash)
          return this.later(x); // deleted or edited here and not scanned yet
        expected.set(rel, { size: Number(fst.size), mtimeNs: fst.mtimeNs, ino: fst.ino });
      }
      const unknown = await this.unknownUnder(x, abs, expected, expectedDirs);
      if (unknown === 'new') return this.later(x); // made here, not uploaded yet
    }
    const names = ctx.journal.localNames().filter((n) => n.path === x || n.path.startsWith(x + '/'));
    ctx.journal.transaction(() => {
      ctx.journal.deleteFilesUnder(x);
      ctx.journal.forgetLocalNamesUnder(x);
      this.setState(x, 'excluded');
    });
    const retry = this.retries.get(x);
    if (retry?.timer !== undefined) clearTimeout(retry.timer);
    this.retries.delete(x);
    ctx.showLocalNames();
    // No "deleted" in Recent activity: nothing was deleted (its row would offer to restore
    // it); Settings → Choose folders shows the folder as not on this computer.
    if (st === undefined) return;
    const held = nodePath.join(
      nodePath.dirname(abs),
      `${PARTIAL_PREFIX}evict-${randomBytes(4).toString('hex')}`,
    );
    try {
      await fsp.rename(abs, held);
    } catch (e) {
      // Still here (busy, or no permission): undo, so it stays synced until the next try.
      ctx.journal.transaction(() => {
        for (const r of rows) ctx.journal.upsertFile(r);
        for (const n of names) ctx.journal.recordLocalName(n.path, n.localName, n.reason);
        this.setState(x, 'leaving');
      });
      ctx.status.warn(`could not remove ${x} from this device yet: ${(e as Error).message}`);
      return this.later(x);
    }
    // A file written between the check and the rename: keep everything as a conflict.
    const late = await this.changedSince(held, expected, expectedDirs, x);
    if (late) {
      const renamed = await this.conflictRename(x, held);
      if (renamed === undefined) ctx.status.warn(`kept ${x} on this device: it changed while being removed`);
      return;
    }
    const remnants = await this.unknownUnder(x, held, expected, expectedDirs);
    if (Array.isArray(remnants))
      for (const r of remnants)
        await ctx.trash.keep(nodePath.join(held, r), nodePath.join(ctx.paths.localRel(x), r));
    await fsp.rm(held, { recursive: true, force: true });
  }

  /**
   * What is on disk under `abs` (the local copy of `x`) beyond the expected synced entries:
   * 'new' when something the scanner would upload is there, else the remnants (ignored
   * files, names Weft cannot send, links), as local paths relative to `abs`.
   */
  private async unknownUnder(
    x: string,
    abs: string,
    expected: ReadonlyMap<string, Snapshot>,
    expectedDirs: ReadonlySet<string>,
  ): Promise<'new' | string[]> {
    const remnants: string[] = [];
    const walk = async (dirAbs: string, relLocal: string, remote: string): Promise<boolean> => {
      const names = await fsp.readdir(dirAbs).catch(() => [] as string[]);
      for (const name of names) {
        const rel = relLocal === '' ? name : nodePath.join(relLocal, name);
        const st = await fsp.lstat(nodePath.join(dirAbs, name)).catch(() => undefined);
        if (st === undefined) continue;
        if (st.isDirectory() && expectedDirs.has(rel)) {
          const r = this.ctx.paths.remoteName(name.normalize('NFC'));
          if (!(await walk(nodePath.join(dirAbs, name), rel, `${remote}/${r ?? name}`))) return false;
          continue;
        }
        if (st.isFile() && expected.has(rel)) continue;
        const remoteName = name.startsWith(PARTIAL_PREFIX)
          ? undefined
          : this.ctx.paths.remoteName(name.normalize('NFC'));
        const syncable =
          remoteName !== undefined &&
          (st.isFile() || st.isDirectory()) &&
          !this.ctx.ignore.ignores(`${remote}/${remoteName}`, st.isDirectory());
        if (syncable) return false;
        remnants.push(rel);
      }
      return true;
    };
    return (await walk(abs, '', x)) ? remnants : 'new';
  }

  /** Did anything under `held` change from the checked snapshot (or appear)? */
  private async changedSince(
    held: string,
    expected: ReadonlyMap<string, Snapshot>,
    expectedDirs: ReadonlySet<string>,
    x: string,
  ): Promise<boolean> {
    for (const [rel, s] of expected) {
      const st = await fsp.lstat(nodePath.join(held, rel), { bigint: true }).catch(() => undefined);
      if (!st || Number(st.size) !== s.size || st.mtimeNs !== s.mtimeNs || st.ino !== s.ino) return true;
    }
    return (await this.unknownUnder(x, held, expected, expectedDirs)) === 'new';
  }

  /** Rename what is at `abs` to "<x> (selective sync conflict[ n])" and scan it; its new path. */
  private async conflictRename(x: string, abs: string): Promise<string | undefined> {
    const parent = x.includes('/') ? x.slice(0, x.lastIndexOf('/')) : '';
    const name = x.slice(x.lastIndexOf('/') + 1);
    for (let n = 1; n < 100; n++) {
      const candidateName = `${name}${CONFLICT_SUFFIX.slice(0, -1)}${n === 1 ? '' : ` ${n}`})`;
      const candidate = parent === '' ? candidateName : `${parent}/${candidateName}`;
      if (this.ctx.journal.getFile(candidate) || this.selection.isDeselected(candidate)) continue;
      let target: string;
      try {
        target = await this.ctx.at(candidate);
      } catch {
        return undefined;
      }
      if ((await fsp.lstat(target).catch(() => undefined)) !== undefined) continue;
      try {
        await fsp.rename(abs, target);
      } catch (e) {
        this.ctx.status.warn(`could not rename ${x} out of the way: ${(e as Error).message}`);
        return undefined;
      }
      this.ctx.status.activity({
        kind: 'conflicted',
        path: x,
        detail: `${candidate}: made here in a folder this device leaves out`,
      });
      this.ctx.markDirty([candidate]);
      return candidate;
    }
    return undefined;
  }
}
