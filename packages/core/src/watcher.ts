/**
 * File-system events are hints (Syncthing's watch aggregator): events mark folders dirty;
 * after a quiet spell the dirty set is handed to the scanner, which finds what changed. A
 * flood of events collapses into one full rescan; a periodic full rescan catches anything
 * missed.
 *
 * Folders are watched, never files (issue #16: chokidar held a watch and a stat per file —
 * 625 MiB and 26 s to start over 100,000 files; this watcher, one fs.watch per folder on
 * Linux and one recursive fs.watch on macOS and Windows, where the OS watches the tree
 * natively, costs next to nothing per file). A folder watch reports its entries' creation,
 * removal, renames and content changes by name, so the event names the folder to rescan.
 * A new folder gets its own watch (and a rescan once watched, for what appeared inside it
 * before). When the OS refuses more watches (inotify's limit), the watcher says so in
 * `degraded` and falls back to frequent full rescans.
 */
import type { Dirent, FSWatcher } from 'node:fs';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { type Disposable, Emitter, toDisposable } from './lifecycle.ts';
import { PARTIAL_PREFIX } from './local-fs.ts';

/** Folders listed at once while the watches of a tree are set up (the thread pool has 4 threads). */
const TREE_READS = 4;

export interface WatchOptions {
  /** Quiet time before dirty paths are scanned. Default 300 ms. */
  readonly debounceMs?: number;
  /** More dirty paths than this at once: rescan everything. Default 2,000. */
  readonly floodThreshold?: number;
  /** Full rescan interval. Default 10 minutes; 0 disables. */
  readonly rescanMs?: number;
  /** No OS events (network filesystems): full rescans every `pollMs` instead. */
  readonly usePolling?: boolean;
  /** Full rescan interval when polling or when the OS refused watches. Default 60 s. */
  readonly pollMs?: number;
  /** Watch each folder (Linux's way) even where the OS could watch the tree at once (tests). */
  readonly perFolder?: boolean;
  /**
   * Map a local relative path (`/`-separated) to the remote path the scanner works in
   * (LocalPaths.remotePath); undefined when a name is not one Weft writes. Default: as is.
   */
  readonly toRemote?: (localRel: string) => string | undefined;
}

/** Scope for the scanner: provider paths, or [''] for everything. */
export type DirtySet = readonly string[];

export class FolderWatcher implements Disposable {
  private readonly onDirtyEmitter = new Emitter<DirtySet>();
  readonly onDirty = this.onDirtyEmitter.on.bind(this.onDirtyEmitter);
  /** Per-folder watches, by local relative path ('' is the root). */
  private readonly folders = new Map<string, FSWatcher>();
  private tree: FSWatcher | undefined;
  private dirty = new Set<string>();
  private everything = false;
  private timer: NodeJS.Timeout | undefined;
  private rescanTimer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private disposed = false;
  /** The OS refused a watch: changes are found by frequent full rescans instead. */
  degraded = false;

  constructor(
    private readonly root: string,
    private readonly options: WatchOptions = {},
  ) {}

  /** How many OS watches are held (one per folder, or one for the tree). */
  get watchCount(): number {
    return this.tree ? 1 : this.folders.size;
  }

  async start(): Promise<void> {
    if (this.options.usePolling) this.fallBackToPolling();
    else if (!this.options.perFolder && (process.platform === 'darwin' || process.platform === 'win32')) {
      try {
        const w = fs.watch(this.root, { recursive: true }, (_event, name) => {
          if (name) this.mark(nodePath.join(this.root, name.toString()));
          else this.markEverything();
        });
        w.on('error', () => this.markEverything());
        this.tree = w;
      } catch {
        this.fallBackToPolling();
      }
    } else await this.watchTree('');
    const every = this.options.rescanMs ?? 600_000;
    if (every > 0) this.rescanTimer = setInterval(() => this.markEverything(), every);
  }

  private fallBackToPolling(): void {
    this.degraded = true;
    if (this.pollTimer || this.disposed) return;
    this.pollTimer = setInterval(() => this.markEverything(), this.options.pollMs ?? 60_000);
  }

  private abs(rel: string): string {
    return rel === '' ? this.root : nodePath.join(this.root, ...rel.split('/'));
  }

  /**
   * Watch `rel` and every folder under it (each watched before it is listed: nothing slips
   * between), TREE_READS folders listed at once: one at a time, the thread pool's round trips
   * were most of an agent's start at 100,000 files (the scan waits for the watches; issue #16).
   */
  private watchTree(rel: string): Promise<void> {
    const stack = [rel];
    let reading = 0;
    return new Promise<void>((done) => {
      const next = (): void => {
        while (reading < TREE_READS && stack.length > 0 && !this.disposed) {
          const r = stack.pop() as string;
          if (this.folders.has(r) || !this.watchFolder(r)) continue;
          reading += 1;
          fsp
            .readdir(this.abs(r), { withFileTypes: true })
            .then(
              (entries: Dirent[]) => {
                for (const e of entries)
                  if (e.isDirectory() && !e.name.startsWith(PARTIAL_PREFIX))
                    stack.push(r === '' ? e.name : `${r}/${e.name}`);
              },
              () => this.unwatch(r), // gone meanwhile
            )
            .finally(() => {
              reading -= 1;
              next();
            });
        }
        if (reading === 0) done(); // nothing left to list (or disposed)
      };
      next();
    });
  }

  private watchFolder(rel: string): boolean {
    if (this.disposed) return false;
    let w: FSWatcher;
    try {
      w = fs.watch(this.abs(rel), (event, name) => this.onEvent(rel, event, name?.toString()));
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOSPC' || code === 'EMFILE') this.fallBackToPolling(); // out of watches
      return false;
    }
    w.on('error', () => {
      this.unwatch(rel);
      this.markFolder(rel);
    });
    this.folders.set(rel, w);
    return true;
  }

  private unwatch(rel: string): void {
    for (const [r, w] of this.folders) {
      if (r === rel || r.startsWith(rel + '/') || rel === '') {
        w.close();
        this.folders.delete(r);
      }
    }
  }

  private onEvent(folder: string, event: string, name: string | undefined): void {
    if (this.disposed) return;
    if (name === undefined) {
      this.markFolder(folder); // the OS did not say which entry
      return;
    }
    if (name.startsWith(PARTIAL_PREFIX)) return;
    const rel = folder === '' ? name : `${folder}/${name}`;
    this.mark(this.abs(rel));
    if (event !== 'rename') return;
    // Created, removed or renamed: a folder that appeared gets a watch, one that left loses it.
    void fsp.lstat(this.abs(rel)).then(
      async (st) => {
        if (!st.isDirectory() || this.folders.has(rel)) return;
        await this.watchTree(rel);
        this.markFolder(rel); // what appeared inside before the watch
      },
      () => this.unwatch(rel),
    );
  }

  private mark(abs: string): void {
    const rel = nodePath.relative(this.root, abs).split(nodePath.sep).join('/');
    if (rel.startsWith('..')) return;
    // The parent is rescanned: a rename shows up there as one entry gone, one new.
    this.markFolder(rel.includes('/') ? rel.slice(0, rel.lastIndexOf('/')) : '');
  }

  /** Rescan the folder at this local relative path (and what is under it). */
  private markFolder(localRel: string): void {
    if (this.disposed) return;
    const remote = this.options.toRemote ? this.options.toRemote(localRel) : localRel;
    if (remote === undefined) {
      this.markEverything(); // a folder whose name Weft does not write: the full scan reports it
      return;
    }
    this.dirty.add(remote);
    if (this.dirty.size > (this.options.floodThreshold ?? 2000)) this.everything = true;
    this.schedule();
  }

  markEverything(): void {
    if (this.disposed) return;
    this.everything = true;
    this.schedule();
  }

  private schedule(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.flush(), this.options.debounceMs ?? 300);
  }

  private flush(): void {
    this.timer = undefined;
    const scope = this.everything ? [''] : minimalScope([...this.dirty]);
    this.dirty.clear();
    this.everything = false;
    if (scope.length > 0) this.onDirtyEmitter.fire(scope);
  }

  dispose(): void {
    this.disposed = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.rescanTimer) clearInterval(this.rescanTimer);
    if (this.pollTimer) clearInterval(this.pollTimer);
    for (const w of this.folders.values()) w.close();
    this.folders.clear();
    this.tree?.close();
    this.tree = undefined;
    this.onDirtyEmitter.dispose();
  }
}

/** Drop paths already covered by an ancestor in the set. */
export function minimalScope(paths: readonly string[]): string[] {
  if (paths.includes('')) return [''];
  const set = new Set(paths);
  return [...set]
    .filter((p) => {
      for (let i = p.indexOf('/'); i >= 0; i = p.indexOf('/', i + 1))
        if (set.has(p.slice(0, i))) return false;
      return true;
    })
    .sort();
}

export { toDisposable };
