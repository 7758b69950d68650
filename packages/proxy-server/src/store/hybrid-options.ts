/** The hybrid store's options and the writer every namespace write is made for (hybrid.ts). */
import type { Logger } from 'pino';
import type { FsProvider, Provider } from '@weft/providers';
import type { ChangeRecord } from '@weft/wire';
import type { ProxyMetrics } from '../metrics.ts';
import type { MetadataStore } from './metadata.ts';
import type { RelayCache } from './relay-cache.ts';

export interface Writer {
  readonly userId: string;
  readonly deviceId: string;
  readonly deviceName: string;
}

export interface HybridStoreOptions {
  readonly fs: FsProvider;
  readonly objects: Provider;
  readonly meta: MetadataStore;
  readonly relay: RelayCache;
  readonly stagingDir: string;
  readonly smallFileBytes: number;
  readonly log: Logger;
  readonly metrics: ProxyMetrics;
  readonly onChanges: (userId: string, records: ChangeRecord[]) => void;
  /** Bandwidth samples for the scheduler's estimate (Eq. 4). */
  readonly onObjectTransfer: (bytes: number, ms: number) => void;
  readonly now?: () => number;
  /** The user's storage quota in bytes, undefined for none (default: none for anyone). */
  readonly quotaLimit?: (userId: string) => number | undefined;
  /**
   * A small file's bytes (or range) from its pack when its filesystem-tier copy may have been
   * dropped (packs.ts readDropped); undefined: read the filesystem tier.
   */
  readonly readPacked?: (
    sha256: string,
    range: { start: number; end: number } | undefined,
  ) => Promise<Uint8Array | undefined>;
  /** Recovery: the stub of a dropped copy, or undefined (pack-stub.ts decodeStub). */
  readonly packedStub?: (
    bytes: Uint8Array,
  ) => Promise<{ sha256: string; size: number; mtimeMs: number } | undefined>;
  /** How long replaced and deleted file versions are kept (version-gc.ts); 0 or absent: none. */
  readonly versionRetentionMs?: number;
}
