export { DropboxEmulator, type DropboxEmulatorOptions, headerSafeJson } from './dropbox.ts';
export {
  FaultInjector,
  FaultRuleSchema,
  type FaultRule,
  type FaultAction,
  type FaultStats,
} from './faults.ts';
export { EmulatorServer, HttpError, type EmulatorOptions, type Traffic } from './http.ts';
export { OAuthServer } from './oauth.ts';
export { DropboxContentHasher, QuickXorHasher, dropboxContentHash, quickXorHash } from './hashes.ts';
export { Tree, type TreeNode } from './tree.ts';
export {
  GDriveEmulator,
  type GDriveEmulatorOptions,
  FOLDER_MIME,
  parseFields,
  applyFields,
  parseQuery,
} from './gdrive.ts';
export { OneDriveEmulator, type OneDriveEmulatorOptions, parseEntityTags } from './onedrive.ts';
export { createLocalCertificate, sharedLocalCertificate, type LocalCertificate } from './tls.ts';
