/**
 * The status model: one observable state per folder, read by `weft status` and the desktop
 * UI. Plain data, serialisable as JSON; changes are announced through a typed event.
 */
import { emptyFolderStatus } from '@weft/ui-contract';
import { Emitter } from './lifecycle.ts';

/**
 * `removed`: the server refused this device's token (revoked); syncing has stopped for good.
 * `full`: Weft storage refused an upload for lack of space (QUOTA_EXCEEDED); uploads wait,
 * downloads and deletes go on, and uploads resume by themselves once there is room.
 */
export type FolderState =
  'idle' | 'scanning' | 'syncing' | 'paused' | 'offline' | 'error' | 'removed' | 'full';

export interface TransferStatus {
  readonly path: string;
  readonly direction: 'up' | 'down';
  readonly bytesDone: number;
  readonly bytesTotal: number;
  /** Bytes per second, smoothed. */
  readonly rate: number;
  /** Seconds left at the current rate (undefined when unknown). */
  readonly etaSeconds: number | undefined;
}

export interface ActivityItem {
  readonly atMs: number;
  readonly kind: 'added' | 'uploaded' | 'downloaded' | 'deleted' | 'moved' | 'conflicted' | 'error';
  readonly path: string;
  readonly detail?: string;
  /** The decision-table row that produced it (docs/sync-decisions.md), if one did. */
  readonly row?: string;
}

export interface ConflictItem {
  readonly path: string;
  readonly copyPath: string;
  readonly atMs: number;
}

/** An entry stored on this disk under another name than its remote one (local-path.ts). */
export interface StoredAsItem {
  /** The remote path. */
  readonly path: string;
  /** Its name on this disk. */
  readonly localName: string;
  /** In words: "Stored as "CON＿.txt" because Windows reserves the name "CON.txt"". */
  readonly notice: string;
}

export interface Savings {
  /** Bytes not sent because a delta went instead of the whole file (both directions). */
  readonly deltaBytesSaved: number;
  /** Requests not made because small files travelled in bundles. */
  readonly requestsSavedByBundling: number;
  /** Operations cancelled or merged while they waited in the queue. */
  readonly operationsEliminated: number;
}

/** This user's Weft storage as last read from the server (`GET /v1/usage`). */
export interface StorageStatus {
  readonly usedBytes: number;
  /** null: no quota. */
  readonly limitBytes: number | null;
  readonly checkedAtMs: number;
  /** Set while the server refuses uploads for lack of space (state `full`). */
  readonly full?: {
    readonly sinceMs: number;
    /** Bytes the refused upload needed beyond what was left. */
    readonly neededBytes: number;
    /** When usage is read again (earlier after a delete or any other activity). */
    readonly nextCheckMs: number;
  };
}

export interface FolderStatus {
  readonly folder: string;
  readonly state: FolderState;
  readonly pausedUntilMs?: number;
  readonly error?: string;
  readonly files: number;
  readonly pendingOperations: number;
  readonly transfers: readonly TransferStatus[];
  readonly recent: readonly ActivityItem[];
  readonly conflicts: readonly ConflictItem[];
  readonly savings: Savings;
  readonly bytesUploaded: number;
  readonly bytesDownloaded: number;
  readonly warnings: readonly string[];
  /** Entries stored under an encoded local name, because this disk cannot hold the remote name. */
  readonly storedAs?: readonly StoredAsItem[];
  /** Weft storage used and its quota; absent until read (or when the server has no usage). */
  readonly storage?: StorageStatus;
  /** How bundles went up: deflated or raw (the adaptive choice), absent before the first. */
  readonly uploadCompression?: UploadCompression;
}

export interface UploadCompression {
  readonly deflated: number;
  readonly raw: number;
  readonly last: 'deflate' | 'raw';
}

/** The states a sync pass writes as it goes (StatusModel.holdState holds them back). */
const PASS_STATES: ReadonlySet<FolderState> = new Set(['idle', 'scanning', 'syncing', 'offline']);

/** Recent activity items kept in the status. */
export const MAX_RECENT = 200;

export class StatusModel {
  private status: FolderStatus;
  private readonly emitter = new Emitter<FolderStatus>();
  readonly onChange = this.emitter.on.bind(this.emitter);

  /**
   * `recent`: activity recorded before (newest first; the engine loads it from its journal);
   * `onActivity`: told each new item, to keep it (the engine writes it to the journal).
   */
  constructor(
    folder: string,
    private readonly history: {
      readonly recent?: readonly ActivityItem[];
      readonly onActivity?: (item: ActivityItem) => void;
    } = {},
  ) {
    this.status = { ...emptyFolderStatus(folder), recent: (history.recent ?? []).slice(0, MAX_RECENT) };
  }

  get(): FolderStatus {
    return this.status;
  }

  /** While it returns a state, that state stands over the pass states an update names. */
  private heldState: (() => FolderState | undefined) | undefined;

  /**
   * Hold the state: while `held()` returns one, an update naming `idle`, `scanning`, `syncing`
   * or `offline` (the states a pass writes as it goes) shows that one instead; its other fields
   * still change. The engine holds "paused" while the person's pause lasts: a pass already on
   * its way when the pause came flipped the state to syncing and back (the tray re-renders its
   * buttons on each flip: "Resume syncing" went from under a click). Other states (error,
   * removed, full) are not held.
   */
  holdState(held: () => FolderState | undefined): void {
    this.heldState = held;
  }

  update(patch: Partial<FolderStatus>): void {
    let p = patch;
    if (p.state !== undefined && PASS_STATES.has(p.state)) {
      const held = this.heldState?.();
      if (held !== undefined && held !== p.state) p = { ...p, state: held };
    }
    this.status = { ...this.status, ...p };
    this.emitter.fire(this.status);
  }

  activity(item: Omit<ActivityItem, 'atMs'> & { atMs?: number }): void {
    const full: ActivityItem = { atMs: Date.now(), ...item };
    this.history.onActivity?.(full);
    this.update({ recent: [full, ...this.status.recent].slice(0, MAX_RECENT) });
  }

  /**
   * Several items at once, oldest first, in one status change: a bundle's outcomes (issue #16:
   * a change per uploaded file copied the recent list twice and the status once, per file).
   */
  activities(items: readonly (Omit<ActivityItem, 'atMs'> & { atMs?: number })[]): void {
    if (items.length === 0) return;
    const atMs = Date.now();
    const newest: ActivityItem[] = [];
    for (const item of items) {
      const full: ActivityItem = { atMs, ...item };
      this.history.onActivity?.(full);
      newest.push(full);
    }
    newest.reverse();
    this.update({ recent: newest.concat(this.status.recent).slice(0, MAX_RECENT) });
  }

  /** `row`: the decision-table row that kept both (docs/sync-decisions.md). */
  conflict(path: string, copyPath: string, row?: string): void {
    this.update({ conflicts: [...this.status.conflicts, { path, copyPath, atMs: Date.now() }] });
    this.activity({ kind: 'conflicted', path, detail: copyPath, ...(row === undefined ? {} : { row }) });
  }

  save(kind: keyof Savings, amount: number): void {
    if (amount <= 0) return;
    this.update({ savings: { ...this.status.savings, [kind]: this.status.savings[kind] + amount } });
  }

  /** One bundle went up, deflated or not. */
  bundleSent(deflated: boolean): void {
    const c = this.status.uploadCompression ?? { deflated: 0, raw: 0, last: 'raw' as const };
    this.update({
      uploadCompression: deflated
        ? { ...c, deflated: c.deflated + 1, last: 'deflate' }
        : { ...c, raw: c.raw + 1, last: 'raw' },
    });
  }

  transfer(t: TransferStatus): void {
    const others = this.status.transfers.filter((x) => !(x.path === t.path && x.direction === t.direction));
    this.update({ transfers: t.bytesDone >= t.bytesTotal ? others : [...others, t] });
  }

  warn(message: string): void {
    this.update({ warnings: [message, ...this.status.warnings].slice(0, 50) });
  }

  dispose(): void {
    this.emitter.dispose();
  }
}
