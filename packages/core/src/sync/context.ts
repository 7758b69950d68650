/**
 * What discovery and the propagators share for one folder: the journal, the status, the
 * remote store, the local name mapping, the trash, the rate estimators — and the few ways
 * they may ask the pass loop (engine.ts) for more work. The engine builds one and passes it
 * to every module under sync/; none of them keeps state of its own.
 */
import { deflateRawSync } from 'node:zlib';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { EntryInfo } from '@weft/wire';
import {
  CANDIDATE_BLOCK_SIZES,
  CompressionAdvisor,
  RateEstimator,
  initialHistory,
  type BlockSizeHistory,
} from '../adaptive.ts';
import { type DecisionRow, type Observation, decide } from '../decisions.ts';
import type { EngineOptions } from '../engine-options.ts';
import { IgnoreRules } from '../ignore-rules.ts';
import { type JournalChanges, commitChanges } from '../journal/changes.ts';
import type { FileRow, Journal } from '../journal/journal.ts';
import { Trash, sha256File } from '../local-fs.ts';
import { LocalPaths, UnsafeLocalPathError, describeEncoding, hostPathRules } from '../local-path.ts';
import type { Op } from '../ops.ts';
import type { RemoteStore } from '../remote/remote-store.ts';
import { type ActivityItem, StatusModel } from '../status.ts';
import { ScanHashes } from './propagate/upload-read.ts';
import { OwnChanges } from './own-changes.ts';

/** A write the server kept as a conflicted copy, mended after the current request (D23). */
export interface ServerConflict {
  readonly op: Op;
  readonly path: string;
  readonly conflictPath: string;
  readonly entry: EntryInfo | undefined;
  /** The decision taken when the refusal came back (D23's action: adopt-server-copy). */
  readonly action: DecisionRow['action'];
}

/** What the pass loop lends the modules: how they ask it for more work. */
export interface PassControl {
  /** Scan these local subtrees in a pass soon. */
  markDirty(scope: readonly string[]): void;
  /** The remote side changed in a way the feed may not repeat: pull again in another pass. */
  pullAgain(): void;
  /** Forget the feed position: the next pull lists the whole folder and compares (D26). */
  reconcileEverything(): void;
}

export interface SyncContextOptions {
  readonly client: RemoteStore;
  readonly deviceName: string;
  readonly journal: Journal;
  readonly status: StatusModel;
  readonly paths: LocalPaths;
  readonly trash: Trash;
  readonly ignore: IgnoreRules;
  readonly small: number;
  readonly caseInsensitive: boolean;
  readonly blocksInFlight: number;
  readonly serverTierRate: number;
  readonly now: () => number;
  readonly trace: ((event: string, detail: unknown) => void) | undefined;
  readonly control: PassControl;
}

/** The folder's status, its recent activity kept in the journal (so it survives a restart). */
export function statusKeptIn(journal: Journal, folder: string): StatusModel {
  return new StatusModel(folder, {
    recent: journal.recentActivity() as ActivityItem[],
    onActivity: (item) => {
      if (journal.isOpen) journal.addActivity(item);
    },
  });
}

export class SyncContext {
  readonly client: RemoteStore;
  readonly deviceName: string;
  readonly journal: Journal;
  readonly status: StatusModel;
  readonly paths: LocalPaths;
  readonly trash: Trash;
  readonly ignore: IgnoreRules;
  /** Files below this many bytes travel in bundles. */
  readonly small: number;
  readonly caseInsensitive: boolean;
  readonly blocksInFlight: number;
  readonly serverTierRate: number;
  readonly now: () => number;
  readonly control: PassControl;
  readonly uploadRate = new RateEstimator();
  /** r_c of Eq. 2: the rsync-wasm engine's rate here, calibrated before the first delta and
   * fed by every sampled estimate and full delta since (the fallback is never used for a decision). */
  readonly deltaRate = new RateEstimator(5, 50 * 1024 * 1024);
  readonly compression = new CompressionAdvisor((sample) => {
    const t = performance.now();
    const out = deflateRawSync(sample, { level: 6 });
    return { outBytes: out.byteLength, seconds: (performance.now() - t) / 1000 };
  });
  /** Block-size measurements waiting for idle time: (old copy, new file). */
  readonly idleEstimates: { path: string; oldCopy: string; newFile: string }[] = [];
  /** The puts this process's scans hashed, and when those scans began (upload-read.ts). */
  readonly scanHashes = new ScanHashes();
  /** Writes the server kept as conflicted copies, mended once the current request is done. */
  readonly serverConflicts: ServerConflict[] = [];
  /** The feed records of our own recorded writes: a pull steps over them (own-changes.ts). */
  readonly ownChanges = new OwnChanges();
  /** How the last large upload travelled (for tests and benchmarks). */
  lastUpload: { path: string; mode: 'delta' | 'whole'; bytes: number } | undefined;
  private readonly traceHook: ((event: string, detail: unknown) => void) | undefined;

  constructor(o: SyncContextOptions) {
    this.client = o.client;
    this.deviceName = o.deviceName;
    this.journal = o.journal;
    this.status = o.status;
    this.paths = o.paths;
    this.trash = o.trash;
    this.ignore = o.ignore;
    this.small = o.small;
    this.caseInsensitive = o.caseInsensitive;
    // Only a disk that folds case asks caseClash: only its journal pays the index's upkeep.
    if (o.caseInsensitive) this.journal.ensureCaseFoldIndex();
    this.blocksInFlight = o.blocksInFlight;
    this.serverTierRate = o.serverTierRate;
    this.now = o.now;
    this.traceHook = o.trace;
    this.control = o.control;
  }

  /** The context of the folder an engine with these options syncs (defaults as EngineOptions says). */
  static forFolder(
    options: EngineOptions,
    journal: Journal,
    status: StatusModel,
    control: PassControl,
  ): SyncContext {
    return new SyncContext({
      client: options.client,
      deviceName: options.deviceName,
      journal,
      status,
      paths: new LocalPaths(options.folder, options.pathRules ?? hostPathRules(), (l) =>
        journal.remoteNameOf(l),
      ),
      trash: new Trash(nodePath.join(options.stateDir, 'trash')),
      ignore: new IgnoreRules(options.ignore ?? []),
      small: options.smallFileBytes ?? 2 * 1024 * 1024,
      caseInsensitive: options.caseInsensitive ?? false,
      blocksInFlight: options.blocksInFlight ?? 4,
      serverTierRate: options.serverTierRate ?? 100 * 1024 * 1024,
      now: options.now ?? Date.now,
      trace: options.trace,
      control,
    });
  }

  trace(event: string, detail: unknown): void {
    this.traceHook?.(event, detail);
  }

  /** Whether trace() goes anywhere (a detail costly to build is built only then). */
  get tracing(): boolean {
    return this.traceHook !== undefined;
  }

  /**
   * Decide one observation (decisions.ts) and trace it: what was seen, anything else the
   * caller adds, and the row taken (docs/sync-decisions.md).
   */
  decide(o: Observation, seen: Record<string, unknown> = {}): DecisionRow {
    const row = decide(o);
    this.traceHook?.('decide', { ...o, ...seen, row: row.id, action: row.action });
    return row;
  }

  markDirty(scope: readonly string[]): void {
    this.control.markDirty(scope);
  }

  /** Where the remote path `p` is on this disk; throws UnsafeLocalPathError (local-path.ts). */
  at(p: string, allowRoot = false): Promise<string> {
    return this.paths.resolve(p, allowRoot);
  }

  /**
   * Run one remote change's local effect; a path that cannot be placed inside the folder
   * (or passes through a symbolic link) is refused with a warning and nothing is touched,
   * and the rest of the pass goes on. The entry stays on the server.
   */
  async guarded(p: string, fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (e) {
      if (!(e instanceof UnsafeLocalPathError)) throw e;
      this.status.warn(`not written: ${JSON.stringify(p)}: ${e.message}`);
      this.status.activity({ kind: 'error', path: p, detail: e.message });
    }
  }

  /** The content hash of `p` on disk (the journal's, when its stat has not moved), or undefined. */
  async localHash(row: FileRow | undefined, p: string): Promise<string | undefined> {
    let abs: string;
    let st: import('node:fs').BigIntStats;
    try {
      abs = await this.at(p);
      st = await fsp.lstat(abs, { bigint: true });
    } catch {
      return undefined;
    }
    if (!st.isFile()) return undefined;
    if (row && row.hash && row.size === Number(st.size) && row.mtimeNs === st.mtimeNs && row.inode === st.ino)
      return row.hash;
    return sha256File(abs);
  }

  /** The block-size history of a file (HyCloud Eq. 1), or the initial one. */
  history(p: string): BlockSizeHistory {
    const h = this.journal.deltaHistory(p);
    return h && h.probs.length === CANDIDATE_BLOCK_SIZES.length ? h : initialHistory();
  }

  /** A journal entry whose name differs from `p` only by case. */
  caseClash(p: string): boolean {
    // The journal's case-fold index (issue #16: this read every row below the parent, the
    // whole journal for a file in the root); the rows it names, kept to the parent's as before.
    const parent = p.includes('/') ? p.slice(0, p.lastIndexOf('/')) : '';
    return this.journal
      .caseFoldTwins(p)
      .some((q) => parent === '' || q === parent || q.startsWith(`${parent}/`));
  }

  /** Is `p` (or a name the journal holds) already taken? For conflicted-copy names. */
  readonly taken = (p: string): boolean => this.journal.getFile(p) !== undefined;

  // ---------------------------------------------------------------- local names

  /** Add to `out` that `p` is stored under an encoded local name, if it is (shown once committed). */
  noteLocalName(p: string, out: JournalChanges): JournalChanges {
    const mapped = this.paths.map(p);
    const last = mapped.names.length - 1;
    const enc = mapped.encoded.find((e) => e.index === last);
    return enc ? out.recordLocalName(p, mapped.names[last] as string, enc.reason) : out;
  }

  /**
   * Record what a propagation changed (sync/propagate/* return it) in one transaction; the
   * status then lists the local names anew if they changed.
   */
  commit(changes: JournalChanges | undefined): void {
    if (!changes) return;
    commitChanges(this.journal, changes);
    if (changes.touchesLocalNames) this.showLocalNames();
  }

  /** The status lists every entry stored under another local name, with the reason in words. */
  showLocalNames(): void {
    const rows = this.journal.localNames();
    if (rows.length === 0 && (this.status.get().storedAs ?? []).length === 0) return;
    this.status.update({
      storedAs: rows.slice(0, 200).map((r) => ({
        path: r.path,
        localName: r.localName,
        notice: describeEncoding(
          r.path.slice(r.path.lastIndexOf('/') + 1),
          r.localName,
          r.reason as Parameters<typeof describeEncoding>[2],
          this.paths.rules,
        ),
      })),
    });
  }
}
