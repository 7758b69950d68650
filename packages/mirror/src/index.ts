export {
  MirrorEngine,
  type ChangeWaiter,
  type MirrorEngineOptions,
  type MirrorStats,
  type ReplicaConfig,
  type ReplicaStatus,
  zeroMirrorStats,
} from './engine.ts';
export {
  openDatabase,
  migrate,
  SqliteMirrorBooks,
  SqliteShareStore,
  type HeadEntry,
  type KnownEntry,
  type LogRecord,
  type MirrorBooks,
  type Outage,
  type OutageCause,
  type ShareStore,
} from './store.ts';
export {
  atOrUnder,
  loggedOp,
  logRecord,
  outageOf,
  type LogRow as MirrorLogRow,
  type OutageRow,
} from './books-store.ts';
export type { LoggedOp, Op } from './ops.ts';
export { type Clock, systemClock } from './clock.ts';
export {
  MirrorError,
  MirrorConfigError,
  NotQuiescentError,
  MissingContentError,
  type MirrorErrorCode,
  type ShareErrorCode,
} from './errors.ts';
export {
  ShareRegistry,
  ShareError,
  replicaSpec,
  inviteHash,
  type Share,
  type ShareMember,
  type ShareRegistryOptions,
  type ReplicaSpec,
} from './shares.ts';
export {
  CredentialVault,
  VaultError,
  keysFromEnv,
  openSecret,
  parseKey,
  sealSecret,
  type SealedSecret,
  type VaultKeys,
} from './vault.ts';
export {
  BlockSizePredictor,
  BatchError,
  CANDIDATE_BLOCK_SIZES,
  DEFAULT_BLOCK_SIZE,
  TRANSFER_BLOCK_BYTES,
  chooseCompression,
  compareBatch,
  planTransfers,
  validateBatch,
  type CompressionChoice,
  type DestinationCache,
  type FileMeta,
  type TransferPlan,
  type Verdict,
} from './interproxy/compare.ts';
