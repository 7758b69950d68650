export { MirrorEngine, type MirrorEngineOptions, type MirrorStats, type ReplicaConfig } from './engine.ts';
export { openDatabase, migrate, ShareStore, type KnownEntry } from './store.ts';
export type { LoggedOp, Op } from './ops.ts';
