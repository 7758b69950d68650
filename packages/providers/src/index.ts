export * from './provider.ts';
export * from './errors.ts';
export * from './features.ts';
export * from './paths.ts';
export { collect, isReplayable, openBody, rechunk, sha256Hex } from './body.ts';
export { Backoff, type BackoffPolicy, backoffDelay, parseRetryAfter } from './backoff.ts';
export { KeyedMutex } from './keyed-mutex.ts';
export { MemoryProvider, type MemoryProviderOptions } from './adapters/memory.ts';
export {
  FsProvider,
  FS_STATE_DIR,
  type FsProviderOptions,
  type ReplaceManyItem,
  type WriteManyItem,
} from './adapters/fs.ts';
export { S3Provider, classifyS3, type S3ProviderOptions } from './adapters/s3.ts';
export { DropboxProvider, classifyDropbox, type DropboxProviderOptions } from './adapters/dropbox.ts';
export { GDriveProvider, classifyGDrive, type GDriveProviderOptions } from './adapters/gdrive.ts';
export { OneDriveProvider, classifyGraph, type OneDriveProviderOptions } from './adapters/onedrive.ts';
export * from './oauth/index.ts';
export { ForwardingProvider, type CallInfo, type OpName } from './wrappers/forwarding.ts';
export { RetryingProvider, withRetry, type RetryOptions } from './wrappers/retry.ts';
export { PacedProvider, TokenBucket, withPacer, type PacerOptions } from './wrappers/pacer.ts';
export { ConcurrencyLimitedProvider, Semaphore, withConcurrency } from './wrappers/concurrency.ts';
export { LoggingProvider, withLogging, type ProviderLogger } from './wrappers/logging.ts';
export { WRAP_DEFAULTS, wrapProvider, type WrapConfig } from './wrappers/compose.ts';
export {
  CountingProvider,
  withCounting,
  LIST_PAGE,
  type RequestClass,
  type RequestSink,
} from './wrappers/counting.ts';
export { realSleep, type Sleep } from './wrappers/sleep.ts';
