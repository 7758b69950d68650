export { MirrorEngine, type MirrorEngineOptions, type MirrorStats, type ReplicaConfig } from './engine.ts';
export { openDatabase, migrate, ShareStore, type KnownEntry } from './store.ts';
export type { LoggedOp, Op } from './ops.ts';
export {
  ShareRegistry,
  ShareError,
  type Share,
  type ShareMember,
  type ShareRegistryOptions,
  type ReplicaSpec,
} from './shares.ts';
export { CredentialVault, VaultError, keysFromEnv, parseKey, type VaultKeys } from './vault.ts';
