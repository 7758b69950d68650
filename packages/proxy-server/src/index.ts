export { startProxyServer, parseRange, SERVER_VERSION, type RunningProxyServer } from './server.ts';
export {
  parseConfig,
  loadConfigFile,
  ProxyConfig,
  ConfigError,
  ENV_OVERRIDES,
  type ProxyConfigInput,
} from './config.ts';
export { OpScheduler, BandwidthEstimator, type ScheduledOp, type SchedulerOptions } from './scheduler.ts';
export type { OpLogLine } from './op-log.ts';
export { SqliteMetadataStore } from './store/sqlite.ts';
export { PostgresMetadataStore } from './store/postgres.ts';
export type { MetadataStore } from './store/metadata.ts';
export {
  LINK_EXTENSION,
  decodeLinkFile,
  objectKey,
  signatureBlockSize,
  signatureKey,
  signatureStrongLength,
  type LinkFile,
} from './store/link-file.ts';
