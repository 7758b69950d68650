export { Engine, type EngineOptions } from './engine.ts';
export { startAgent, statusPage, type AgentOptions, type RunningAgent } from './agent.ts';
export { MAX_LOGIN_TTL_MS } from './ui-server/http.ts';
export {
  CLOUD_CLIENT_VARIABLES,
  CloudClientSettingsError,
  cloudClientsFrom,
  defaultCloudsFile,
  loadCloudClients,
  type CloudClients,
} from './cloud-clients.ts';
export { ProxyClient, RemoteError, OfflineError } from './remote/proxy-client.ts';
export { ServerPool, type ServerInstance, type ServerPoolOptions } from './remote/server-pool.ts';
export type { ListPageRequest, RemoteStore, RequestTiming } from './remote/remote-store.ts';
export {
  StatusModel,
  type FolderStatus,
  type FolderState,
  type TransferStatus,
  type ActivityItem,
} from './status.ts';
export { Journal } from './journal/journal.ts';
export { coalesce, coalesceAll } from './coalesce.ts';
export { DECISIONS, decide } from './decisions.ts';
export { conflictCopyPath, isConflictCopy } from './conflict-name.ts';
export { IgnoreRules, DEFAULT_IGNORES } from './ignore-rules.ts';
export type { Op } from './ops.ts';
export {
  SecretStoreError,
  defaultKeyFile,
  keyFileSecretStore,
  memorySecretStore,
  secretTokenStore,
  type SecretStore,
} from './secret-store.ts';
export { loadDevice, type DeviceCredentials } from './device-credentials.ts';
