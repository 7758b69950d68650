/** The inter-proxy transfer protocol (docs/formats/inter-proxy.md) and proxy selection. */
export * from './compare.ts';
export {
  PeerSender,
  type PeerSenderOptions,
  type SenderStats,
  type SourceFile,
  type FileOutcome,
  type TransferMode,
} from './sender.ts';
export {
  PeerReceiver,
  type PeerReceiverOptions,
  type ReceivedFile,
  type ReceiverStats,
  type PeerRequest,
  type PeerRequestContext,
  type PeerRequestHandler,
} from './receiver.ts';
export { sealCredentials, openCredentials } from './credentials.ts';
export type { DestinationMessage } from './frames.ts';
export { PeerCache } from './cache.ts';
export { listenPeer, type PeerListener } from './listener.ts';
export { PeerAuthenticator, PeerAuthError, signUpgrade, MIN_SECRET_LENGTH } from './auth.ts';
export { PEER_STREAM_PATH, PROTOCOL_VERSION } from './frames.ts';
export { AdaptiveCompression, LinkRateEstimator } from './compression.ts';
export {
  ProxySelector,
  BandwidthProbe,
  type Measurement,
  type ProxySelectorOptions,
  type BandwidthProbeOptions,
} from './selection.ts';
export { ThrottledLink, type ThrottledLinkOptions, type Forwarder, type LinkStats } from './throttle.ts';
