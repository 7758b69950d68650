/**
 * File-system events are hints (Syncthing's watch aggregator): chokidar events mark paths
 * dirty; after a quiet spell the dirty set is handed to the scanner. A flood of events
 * collapses into one full rescan; a periodic full rescan catches anything missed.
 */
import * as nodePath from 'node:path';
import chokidar, { type FSWatcher } from 'chokidar';
import { type Disposable, Emitter, toDisposable } from './lifecycle.ts';
import { PARTIAL_PREFIX } from './local-fs.ts';

export interface WatchOptions {
  /** Quiet time before dirty paths are scanned. Default 300 ms. */
  readonly debounceMs?: number;
  /** More dirty paths than this at once: rescan everything. Default 2,000. */
  readonly floodThreshold?: number;
  /** Full rescan interval. Default 10 minutes; 0 disables. */
  readonly rescanMs?: number;
  /** Use polling (network filesystems). */
  readonly usePolling?: boolean;
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
  private watcher: FSWatcher | undefined;
  private dirty = new Set<string>();
  private everything = false;
  private timer: NodeJS.Timeout | undefined;
  private rescanTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly root: string,
    private readonly options: WatchOptions = {},
  ) {}

  async start(): Promise<void> {
    const w = chokidar.watch(this.root, {
      ignoreInitial: true,
      followSymlinks: false,
      usePolling: this.options.usePolling ?? false,
      ignored: (p: string) => nodePath.basename(p).startsWith(PARTIAL_PREFIX),
    });
    this.watcher = w;
    const mark = (abs: string): void => this.mark(abs);
    w.on('add', mark).on('change', mark).on('unlink', mark).on('addDir', mark).on('unlinkDir', mark);
    w.on('error', () => this.markEverything());
    await new Promise<void>((resolve) => w.once('ready', () => resolve()));
    const every = this.options.rescanMs ?? 600_000;
    if (every > 0) this.rescanTimer = setInterval(() => this.markEverything(), every);
  }

  private mark(abs: string): void {
    const rel = nodePath.relative(this.root, abs).split(nodePath.sep).join('/');
    if (rel.startsWith('..')) return;
    // The parent is rescanned too: a rename shows up there as one entry gone, one new.
    const localParent = rel.includes('/') ? rel.slice(0, rel.lastIndexOf('/')) : '';
    const parent = this.options.toRemote ? this.options.toRemote(localParent) : localParent;
    if (parent === undefined) {
      this.markEverything(); // a folder whose name Weft does not write: the full scan reports it
      return;
    }
    this.dirty.add(parent);
    if (this.dirty.size > (this.options.floodThreshold ?? 2000)) this.everything = true;
    this.schedule();
  }

  markEverything(): void {
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
    if (this.timer) clearTimeout(this.timer);
    if (this.rescanTimer) clearInterval(this.rescanTimer);
    void this.watcher?.close();
    this.watcher = undefined;
    this.onDirtyEmitter.dispose();
  }
}

/** Drop paths already covered by an ancestor in the set. */
export function minimalScope(paths: readonly string[]): string[] {
  if (paths.includes('')) return [''];
  const sorted = [...new Set(paths)].sort();
  const out: string[] = [];
  for (const p of sorted) if (!out.some((q) => p.startsWith(q + '/'))) out.push(p);
  return out;
}

export { toDisposable };
