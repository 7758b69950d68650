/** The redundant object tier (issue #17). docs/redundancy.md. */
import { enableReplay } from './maintenance.ts';
import type { Provider } from '../provider.ts';
import { MigratingRedundantProvider } from './migration.ts';
import { RedundantProvider, type RedundantOptions } from './redundant-provider.ts';

export {
  RedundantProvider,
  BLOB_DIR,
  blobKey,
  type BackendConfig,
  type BackendHealth,
  type RedundantMetrics,
  type RedundantOptions,
} from './redundant-provider.ts';
export {
  enableReplay,
  replaceBackend,
  replayOutageLog,
  scrub,
  type ReplaceProgress,
  type ScrubOptions,
  type ScrubReport,
} from './maintenance.ts';
export { MigratingRedundantProvider, type MigrationOptions, type MigrationStatus } from './migration.ts';
export { parseBlobKey, sweepOrphans, type SweepOptions, type SweepReport } from './orphans.ts';
export { SqlitePlacementStore } from './store.ts';
export {
  checkPutAgainst,
  entrySelect,
  newRevision,
  toEntry,
  type EntryRow as PlacementEntryRow,
  type HoldingRow,
  type LocationRow,
  type LogRow,
  type NewObject,
  type ObjectRow,
  type OwedBlob,
  type PlacementStore,
  type PutConditions,
  type WriteOptions as PlacementWriteOptions,
} from './placement-store.ts';
export * from './status.ts';
export * from './planner.ts';
export * from './fragment.ts';

/**
 * A redundant tier whose backends have their outage log replayed when a probe finds them up.
 * With `legacy` (the store the tier replaces): a MigratingRedundantProvider, serving what
 * is still there and moving it in when `migrate()` or `startMigration()` is called.
 */
export function openRedundantProvider(options: RedundantOptions & { legacy?: Provider }): RedundantProvider {
  const tier = options.legacy
    ? new MigratingRedundantProvider(options, options.legacy)
    : new RedundantProvider(options);
  enableReplay(tier);
  return tier;
}
