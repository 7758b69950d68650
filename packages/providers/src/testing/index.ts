export { countSyncs } from './count-syncs.ts';
export { FaultInjectingProvider, failFirst, type FaultPlan } from './faults.ts';
export { OutageProvider } from './outage.ts';
export {
  startS3Proxy,
  ensureS3ProxyJar,
  cacheDir,
  S3PROXY_VERSION,
  type S3Endpoint,
  type RunningS3Proxy,
} from './s3proxy.ts';
