/**
 * What an Engine is told when it is made (engine.ts), and the status messages it shows
 * when the server refuses this device.
 */
import type { PathRules } from './local-path.ts';
import type { RemoteStore } from './remote/remote-store.ts';
import type { StorageTimings } from './storage-usage.ts';

export interface EngineOptions {
  /** The synced folder. */
  readonly folder: string;
  /** Where the journal and trash live (never inside the folder). */
  readonly stateDir: string;
  /** The server side: a ProxyClient, or an in-memory store in tests. */
  readonly client: RemoteStore;
  readonly deviceName: string;
  /** Files below this go in bundles. Default 2 MiB (HyCloud Fig. 18). */
  readonly smallFileBytes?: number;
  /** Settle time for files being written. Default 1000 ms. */
  readonly settleMs?: number;
  /** Watch the folder (default true); tests may drive syncNow() instead. */
  readonly watch?: boolean;
  /** Pause and ask when one pass would delete more than this share of files… (default 0.5) */
  readonly massDeleteFraction?: number;
  /** …and more than this many files (default 1000, and at least 10). */
  readonly massDeleteCount?: number;
  /** Extra ignore patterns on top of the defaults. */
  readonly ignore?: readonly string[];
  /** Blocks of a large upload in flight at once. Default 4. */
  readonly blocksInFlight?: number;
  /** Bytes/s between the server's object tier and filesystem tier (r_t of HyCloud Eq. 2). Default 100 MiB/s. */
  readonly serverTierRate?: number;
  /** Quiet time after a feed notification before pulling. Default 250 ms. */
  readonly feedDebounceMs?: number;
  /** Listen to the server's live feed (default true); without it, passes run only when asked. */
  readonly liveFeed?: boolean;
  /** The folder's filesystem folds case (macOS, Windows). Default: probed at open. */
  readonly caseInsensitive?: boolean;
  /**
   * First retry after a failed pass (offline, a server error): the wait is drawn in
   * [offlineRetryMs/2, offlineRetryMs) and doubles with each failure in a row up to
   * `offlineRetryCapMs` (sync/retry.ts). Default 2000 ms.
   */
  readonly offlineRetryMs?: number;
  /** The longest wait between retries. Default 15 × offlineRetryMs (30 s). */
  readonly offlineRetryCapMs?: number;
  readonly now?: () => number;
  /** Offline longer than this (ms) and the reconnect runs the consistency check. Default 10 min. */
  readonly longDisconnectMs?: number;
  /** Debug hook: told every remote change applied, decision taken and operation sent. */
  readonly trace?: (event: string, detail: unknown) => void;
  /**
   * Whose filesystem rules name the local files (default: this host's). Tests use `win32`
   * on Linux to show what a Windows device writes (see local-path.ts).
   */
  readonly pathRules?: PathRules;
  /** When Weft storage usage is read, and re-read while it is full (storage-usage.ts). */
  readonly storageTimings?: Partial<StorageTimings>;
}

/** The status message of a device whose token was revoked (removed from its account). */
export const DEVICE_REMOVED_MESSAGE = 'This computer was removed from your Weft account';
/** The status message when the server does not know this device's token at all. */
export const DEVICE_UNKNOWN_MESSAGE =
  'The Weft server no longer recognises this computer; connect it again under Accounts';
