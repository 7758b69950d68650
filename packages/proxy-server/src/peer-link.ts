/**
 * The inter-proxy endpoint (docs/formats/inter-proxy.md): when the config has a `peer`
 * section, this proxy accepts its peers' transfer connections on GET /peer/v1/stream
 * (outside /v1: peers are proxies, not enrolled devices) and can open its own to them.
 * The protocol itself lives in @weft/mirror/interproxy; this file only mounts it.
 */
import * as nodePath from 'node:path';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { z } from 'zod/v4';
import {
  MIN_SECRET_LENGTH,
  PEER_STREAM_PATH,
  PeerAuthError,
  PeerReceiver,
  PeerSender,
  type ReceivedFile,
} from '@weft/mirror/interproxy';
import { ApiError } from './errors.ts';

const ProxyId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'proxy id: A-Z a-z 0-9 _ . - (max 64)');

export const PeerLinkConfig = z.object({
  /** This proxy's id, as its peers know it. */
  id: ProxyId,
  /** One entry per peer proxy: the secret shared by that pair only, and its URL if we dial it. */
  peers: z
    .array(
      z.object({
        id: ProxyId,
        secret: z.string().min(MIN_SECRET_LENGTH),
        /** ws(s)://host:port of the peer (its /peer/v1/stream is appended when missing). */
        url: z.string().optional(),
      }),
    )
    .default([]),
  /** Cache, spool and block-size history. Default: <dataDir>/peer. */
  dir: z.string().optional(),
  /** Transfer block size S_b of our senders (default 4 MiB, the most a peer accepts). */
  blockBytes: z
    .number()
    .int()
    .min(64 * 1024)
    .max(4 * 1024 * 1024)
    .optional(),
  /** Unacknowledged blocks in flight per peer (default 16). */
  maxInFlight: z.number().int().min(1).max(64).optional(),
  /**
   * Bandwidth probes of the clouds of hosted shares, exchanged with the peers, decide which
   * proxy writes which cloud (peer-routing.ts). intervalMs 0: only on demand (tests).
   */
  routing: z
    .object({
      enabled: z.boolean().default(true),
      intervalMs: z
        .number()
        .int()
        .min(0)
        .default(10 * 60 * 1000),
      probeBytes: z
        .number()
        .int()
        .min(1024)
        .max(16 * 1024 * 1024)
        .default(256 * 1024),
      /** A routed write not done by then is made directly (peer down). */
      writeTimeoutMs: z.number().int().min(100).default(120_000),
    })
    .default({ enabled: true, intervalMs: 10 * 60 * 1000, probeBytes: 256 * 1024, writeTimeoutMs: 120_000 }),
});
export type PeerLinkConfig = z.infer<typeof PeerLinkConfig>;

export interface PeerLink {
  readonly id: string;
  /** The configured peers (id, and URL when we dial it). */
  readonly peers: readonly { readonly id: string; readonly url?: string | undefined }[];
  /** The secret of the pair (this proxy, `peerId`). */
  secretOf(peerId: string): string | undefined;
  readonly receiver: PeerReceiver;
  /** Where received files go (the mirror engine's upload); files are only cached until set. */
  setDeliver(fn: ((file: ReceivedFile) => Promise<void>) | undefined): void;
  /** The (one, persistent) connection to a configured peer, opened on first use. */
  sender(peerId: string): PeerSender;
}

export async function registerPeerLink(
  app: FastifyInstance,
  config: PeerLinkConfig,
  dataDir: string,
  log: Logger,
): Promise<PeerLink> {
  const receiver = await PeerReceiver.open({
    selfId: config.id,
    peers: new Map(config.peers.map((p) => [p.id, p.secret])),
    dir: config.dir ?? nodePath.join(dataDir, 'peer'),
    logger: log.child({ component: 'peer-link' }),
  });
  const senders = new Map<string, PeerSender>();
  const verified = new WeakMap<FastifyRequest, { peer: string; nonce: string }>();

  app.get(
    PEER_STREAM_PATH,
    {
      websocket: true,
      // Refused before the upgrade: no protocol state exists for a peer that did not sign.
      preValidation: async (req) => {
        try {
          verified.set(req, receiver.auth.verify(req.headers));
        } catch (e) {
          if (e instanceof PeerAuthError) throw new ApiError('UNAUTHORIZED', e.message);
          throw e;
        }
      },
    },
    (socket, req) => {
      const who = verified.get(req);
      if (!who) return void socket.close(1008, 'not authenticated');
      receiver.accept(socket, who);
    },
  );
  app.addHook('onClose', async () => {
    await Promise.all([...senders.values()].map((s) => s.close()));
    await receiver.close();
  });

  return {
    id: config.id,
    peers: config.peers.map((p) => ({ id: p.id, url: p.url })),
    secretOf: (peerId) => config.peers.find((p) => p.id === peerId)?.secret,
    receiver,
    setDeliver(fn) {
      receiver.deliver = fn;
    },
    sender(peerId) {
      const existing = senders.get(peerId);
      if (existing) return existing;
      const peer = config.peers.find((p) => p.id === peerId);
      if (!peer?.url) throw new Error(`no URL configured for peer ${peerId}`);
      const url = peer.url.endsWith(PEER_STREAM_PATH)
        ? peer.url
        : peer.url.replace(/\/+$/, '') + PEER_STREAM_PATH;
      const s = new PeerSender({
        url,
        selfId: config.id,
        peerId,
        secret: peer.secret,
        ...(config.blockBytes ? { blockBytes: config.blockBytes } : {}),
        ...(config.maxInFlight ? { maxInFlight: config.maxInFlight } : {}),
        logger: log.child({ component: 'peer-link', peer: peerId }),
      });
      senders.set(peerId, s);
      return s;
    },
  };
}
