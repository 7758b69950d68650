export * from './errors.ts';
export * from './api.ts';
export * from './shares.ts';
export * from './versions.ts';
export * from './bundle.ts';
export * from './bundle-scan.ts';
export * from './transfer-block.ts';
export * from './delta-container.ts';
export * from './merkle.ts';
export * from './as-provider.ts';
export * from './write-rule.ts';
export * from './transfer-state.ts';
export * from './cost.ts';
export * from './storage-health.ts';
export * from './read-ahead.ts';
export {
  conflictStamp,
  conflictedCopyPath,
  isConflictCopy,
  sanitizeDevice,
  splitExtension,
} from './conflict.ts';
export * from './pack.ts';
export * from './fast-check.ts';
export * from './server-timing.ts';
