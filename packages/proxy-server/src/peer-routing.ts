/**
 * Which proxy writes a share's changes to which cloud (CoCloud §III-B, DESIGN §5;
 * docs/formats/inter-proxy.md "Routing"). Each proxy probes the clouds of the shares it
 * hosts (and the clouds its peers ask it to probe) with `BandwidthProbe`, and exchanges
 * its figures with its peers over the peer link (`bandwidth` messages). When the mirror
 * writes a file to a cloud that `ProxySelector` says is served by a peer and not by this
 * proxy, the write goes through the link: the content travels as a batch (bundle, blocks or
 * rsync delta against the peer's cached copy), then a `write` request makes the peer do
 * the very same conditional `provider.write` the mirror asked for; its answer (the new
 * entry, or PreconditionFailed/AlreadyExists/…) comes back as the write's result. The
 * mirror's write path (known revisions, conflicted copies, echo suppression) therefore runs
 * unchanged on the hosting proxy — nothing of it is forked. Everything else (stat, read,
 * list, remove, move, mkdir: no bulk bytes) is done directly.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import {
  BandwidthProbe,
  openCredentials,
  ProxySelector,
  sealCredentials,
  type DestinationMessage,
  type FileOutcome,
  type SourceFile,
  type PeerRequest,
  type PeerRequestContext,
} from '@weft/mirror/interproxy';
import {
  AlreadyExistsError,
  AuthError,
  type Body,
  DropboxProvider,
  type Entry,
  GDriveProvider,
  InvalidArgumentError,
  InvalidPathError,
  NotFoundError,
  NotSupportedError,
  OneDriveProvider,
  PreconditionFailedError,
  type Provider,
  type ProviderErrorCode,
  QuotaExceededError,
  TransientError,
  staticToken,
  type WriteOptions,
} from '@weft/providers';
import { ProviderTokens, type ProviderKind } from '@weft/wire';
import type { PeerLink } from './peer-link.ts';

/** A member replica on a cloud account, as the share service builds it. */
export interface RouteTarget {
  readonly shareId: string;
  readonly replicaId: string;
  readonly kind: ProviderKind;
  readonly accountId: string;
  readonly provider: Provider;
  /** The account's current token set, or a promise of it (sealed for a peer that writes or probes for us). */
  readonly tokens: () => unknown;
}

export type ProviderRoute = (t: RouteTarget) => Provider;

export interface PeerRouterOptions {
  readonly link: PeerLink;
  /** API origins of the clouds as this proxy reaches them (config.shares.endpoints). */
  readonly endpoints: Partial<Record<ProviderKind, string>>;
  /** Probe period (default 10 min); 0: only when measureOnce() is called. */
  readonly intervalMs?: number;
  /** Probe file size (default 256 KiB). */
  readonly probeBytes?: number;
  readonly selector?: ProxySelector;
  /** Clock of the probe timings (ms). */
  readonly clock?: () => number;
  /**
   * A routed write not finished in this time (peer down, or an older peer that does not
   * answer `write`) is made directly instead (default 120 s).
   */
  readonly writeTimeoutMs?: number;
  readonly log: Logger;
}

export interface RouterStats {
  /** File writes sent through a peer, and their content bytes. */
  routedWrites: number;
  routedBytes: number;
  /** File writes done directly. */
  localWrites: number;
  /** Routed writes that failed transiently and were made directly instead. */
  fallbacks: number;
  /** Batches the routed writes' content went in (writes made at once share one). */
  routedBatches: number;
  /** Writes performed here for a peer. */
  writesForPeers: number;
  probes: number;
}

/** The provider error a peer reported, rebuilt here so the mirror's write path sees the same class. */
function providerError(code: string, message: string, path: string): Error {
  const errors: Record<ProviderErrorCode, () => Error> = {
    NotFound: () => new NotFoundError(message),
    AlreadyExists: () => new AlreadyExistsError(message),
    PreconditionFailed: () => new PreconditionFailedError(message),
    QuotaExceeded: () => new QuotaExceededError(message),
    Auth: () => new AuthError(message),
    InvalidPath: () => new InvalidPathError(message, path),
    Transient: () => new TransientError(message),
    InvalidArgument: () => new InvalidArgumentError(message),
    NotSupported: () => new NotSupportedError(message),
  };
  return (errors[code as ProviderErrorCode] ?? errors.Transient)();
}

async function bodyBytes(body: Body): Promise<Uint8Array> {
  if (body instanceof Uint8Array) return body;
  const it = typeof body === 'function' ? body() : body;
  const parts: Uint8Array[] = [];
  for await (const c of it) parts.push(c);
  return Buffer.concat(parts);
}

export class PeerRouter {
  readonly selector: ProxySelector;
  readonly stats: RouterStats = {
    routedWrites: 0,
    routedBytes: 0,
    localWrites: 0,
    fallbacks: 0,
    routedBatches: 0,
    writesForPeers: 0,
    probes: 0,
  };
  /** Cloud → an account of it to probe with (ours first, else one a peer handed us). */
  private readonly probeAccounts = new Map<string, Provider>();
  /** Cloud → (kind, token set) of local accounts, to hand to peers for probing. */
  private readonly localAccounts = new Map<string, () => unknown>();
  private readonly peerProviders = new Map<string, Provider>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private readonly listening = new Set<string>();
  /** Per peer: routed contents waiting a moment to go in one batch (bundled when small). */
  private readonly queues = new Map<
    string,
    {
      files: SourceFile[];
      waiters: { resolve: (o: FileOutcome | undefined) => void; reject: (e: unknown) => void }[];
      bytes: number;
      timer: NodeJS.Timeout;
    }
  >();

  constructor(private readonly o: PeerRouterOptions) {
    this.selector = o.selector ?? new ProxySelector();
    o.link.receiver.handleRequest = (msg, ctx) => this.onRequest(msg, ctx);
  }

  private get self(): string {
    return this.o.link.id;
  }

  /** Peers we can dial (have a URL for). */
  private dialable(): string[] {
    return this.o.link.peers.filter((p) => p.url).map((p) => p.id);
  }

  private sender(peer: string) {
    const s = this.o.link.sender(peer);
    if (!this.listening.has(peer)) {
      this.listening.add(peer);
      s.on('bandwidth', (ms: { proxy: string; cloud: string; bytesPerSecond: number; ageMs: number }[]) => {
        for (const m of ms)
          if (m.proxy !== this.self) this.selector.adopt(m.proxy, m.cloud, m.bytesPerSecond, m.ageMs);
      });
    }
    return s;
  }

  /** The peer that writes `cloud` for us, or undefined when this proxy serves it (or nobody is measured). */
  serverFor(cloud: string): string | undefined {
    const servers = this.selector.servers(cloud);
    if (servers.length === 0 || servers.includes(this.self)) return undefined;
    const dial = new Set(this.dialable());
    return servers.find((p) => dial.has(p));
  }

  /** The share service's hook: the replica's provider, its file writes routed when a peer serves its cloud. */
  route: ProviderRoute = (t) => {
    if (!this.probeAccounts.has(t.kind)) this.probeAccounts.set(t.kind, t.provider);
    if (!this.localAccounts.has(t.kind)) this.localAccounts.set(t.kind, t.tokens);
    const routedWrite = async (path: string, body: Body, options: WriteOptions = {}): Promise<Entry> => {
      const peer = this.serverFor(t.kind);
      if (!peer) {
        this.stats.localWrites += 1;
        return t.provider.write(path, body, options);
      }
      const data = await bodyBytes(body);
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new TransientError(`routed write of ${path} via ${peer} timed out`)),
          this.o.writeTimeoutMs ?? 120_000,
        );
      });
      try {
        return await Promise.race([this.writeVia(peer, t, path, data, options), timeout]);
      } catch (e) {
        if (!(e instanceof TransientError)) throw e; // the peer's conditional answer: the engine's to handle
        // The peer could not do it (down, timed out, did not take the content): write directly.
        // Safe even if the peer's write did land: ours is conditional on the same revision,
        // so it fails PreconditionFailed/AlreadyExists and the engine finds its own content.
        this.o.log.warn({ err: e, peer, path }, 'routed write failed: writing directly');
        this.stats.fallbacks += 1;
        this.stats.localWrites += 1;
        return t.provider.write(path, data, options);
      } finally {
        clearTimeout(timer);
      }
    };
    return new Proxy(t.provider, {
      get(target, key) {
        if (key === 'write') return routedWrite;
        const v: unknown = Reflect.get(target, key, target);
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
  };

  private seal(peer: string, cloud: string, tokens: unknown): { cloud: string; sealed: string } {
    const secret = this.o.link.secretOf(peer);
    if (!secret) throw new Error(`no secret for peer ${peer}`);
    return { cloud, sealed: sealCredentials(secret, cloud, { kind: cloud, tokens }) };
  }

  private async writeVia(
    peer: string,
    t: RouteTarget,
    path: string,
    data: Uint8Array,
    options: WriteOptions,
  ): Promise<Entry> {
    const sha256 = options.sha256 ?? createHash('sha256').update(data).digest('hex');
    const cache = `routes/${t.kind}/${t.accountId}/${path}`.replace(/\/+/g, '/');
    const s = this.sender(peer);
    let out;
    try {
      out = await this.sendCoalesced(peer, { path: cache, size: data.byteLength, sha256, content: data });
    } catch (e) {
      // The link's own failures (batch refused, sender closed) are not the cloud's answer.
      throw new TransientError(`peer ${peer} did not take ${path}: ${(e as Error).message}`, undefined, {
        cause: e,
      });
    }
    if (!out || out.status === 'failed')
      throw new TransientError(`peer ${peer} did not take ${path}: ${out?.code ?? ''} ${out?.message ?? ''}`);
    const ans = await s.write({
      account: this.seal(peer, t.kind, await t.tokens()),
      path,
      cache,
      sha256,
      size: data.byteLength,
      ...(options.ifRevision !== undefined ? { ifRevision: options.ifRevision } : {}),
      ...(options.ifNotExists ? { ifNotExists: true } : {}),
    });
    if (ans.type === 'write-failed') {
      throw providerError(ans.code, `via ${peer}: ${ans.message}`, path);
    }
    this.stats.routedWrites += 1;
    this.stats.routedBytes += data.byteLength;
    return {
      path,
      kind: 'file',
      size: ans.entry.size,
      modifiedMs: ans.entry.modifiedMs ?? Date.now(),
      revision: ans.entry.revision,
      ...(ans.entry.hash ? { hash: ans.entry.hash } : {}),
    };
  }

  /**
   * Contents routed at about the same time (the engine applies unrelated paths in
   * parallel) go in one batch: small ones then share bundles, as in CoCloud step 3.
   */
  private sendCoalesced(peer: string, file: SourceFile): Promise<FileOutcome | undefined> {
    let q = this.queues.get(peer);
    if (q?.files.some((f) => f.path === file.path)) {
      this.flush(peer); // a batch names each path once
      q = undefined;
    }
    if (!q) {
      q = { files: [], waiters: [], bytes: 0, timer: setTimeout(() => this.flush(peer), 10) };
      this.queues.set(peer, q);
    }
    const queue = q;
    const p = new Promise<FileOutcome | undefined>((resolve, reject) =>
      queue.waiters.push({ resolve, reject }),
    );
    queue.files.push(file);
    queue.bytes += file.size;
    if (queue.files.length >= 1000 || queue.bytes >= 16 * 1024 * 1024) this.flush(peer);
    return p;
  }

  private flush(peer: string): void {
    const q = this.queues.get(peer);
    if (!q) return;
    this.queues.delete(peer);
    clearTimeout(q.timer);
    this.stats.routedBatches += 1;
    this.sender(peer)
      .send(q.files)
      .then(
        (outs) => q.waiters.forEach((w, i) => w.resolve(outs.find((o) => o.path === q.files[i]?.path))),
        (err: unknown) => q.waiters.forEach((w) => w.reject(err)),
      );
  }

  /** A provider for a cloud account a peer handed us (its sealed token set), made with our endpoints. */
  private peerProvider(ctx: PeerRequestContext, cloud: string, sealed: string): Provider {
    const opened = openCredentials(ctx.secret, cloud, sealed) as { kind: ProviderKind; tokens: unknown };
    const tokens = ProviderTokens.parse(opened.tokens);
    const key = `${opened.kind}\u0000${tokens.accessToken}`;
    let p = this.peerProviders.get(key);
    if (!p) {
      const token = staticToken(tokens.accessToken);
      const ep = this.o.endpoints;
      switch (opened.kind) {
        case 'dropbox':
          p = new DropboxProvider({ token, ...(ep.dropbox ? { baseUrl: ep.dropbox } : {}) });
          break;
        case 'gdrive':
          p = new GDriveProvider({ token, ...(ep.gdrive ? { rootUrl: ep.gdrive } : {}) });
          break;
        case 'onedrive':
          p = new OneDriveProvider({ token, ...(ep.onedrive ? { graphOrigin: ep.onedrive } : {}) });
          break;
        default:
          throw new Error(`unknown cloud ${String(opened.kind)}`);
      }
      this.peerProviders.set(key, p);
    }
    return p;
  }

  private async onRequest(
    msg: PeerRequest,
    ctx: PeerRequestContext,
  ): Promise<DestinationMessage | undefined> {
    if (msg.type === 'bandwidth') {
      for (const m of msg.measurements)
        if (m.proxy !== this.self) this.selector.adopt(m.proxy, m.cloud, m.bytesPerSecond, m.ageMs);
      const fresh: string[] = [];
      for (const a of msg.probe ?? []) {
        if (this.probeAccounts.has(a.cloud)) continue;
        try {
          this.probeAccounts.set(a.cloud, this.peerProvider(ctx, a.cloud, a.sealed));
          fresh.push(a.cloud);
        } catch (err) {
          this.o.log.warn({ err, cloud: a.cloud, peer: ctx.peer }, 'cannot open a probe account');
        }
      }
      // A cloud we were just asked about is measured before answering: one exchange suffices.
      if (fresh.length > 0) await this.probe(fresh);
      return { type: 'bandwidth', measurements: this.selector.own(this.self) };
    }
    const object = ctx.object(msg.sha256);
    if (!object) throw new TransientError(`content of ${msg.path} is not cached here`);
    const provider = this.peerProvider(ctx, msg.account.cloud, msg.account.sealed);
    const data = await readFile(object);
    const e = await provider.write(
      msg.path,
      data,
      msg.ifRevision !== undefined
        ? { ifRevision: msg.ifRevision, sha256: msg.sha256, size: msg.size }
        : msg.ifNotExists
          ? { ifNotExists: true, sha256: msg.sha256, size: msg.size }
          : { sha256: msg.sha256, size: msg.size },
    );
    this.stats.writesForPeers += 1;
    return {
      type: 'written',
      id: msg.id,
      entry: {
        revision: e.revision,
        size: e.size,
        modifiedMs: e.modifiedMs,
        ...(e.hash ? { hash: { algorithm: e.hash.algorithm, value: e.hash.value } } : {}),
      },
    };
  }

  private async probe(clouds?: readonly string[]): Promise<void> {
    const map = new Map([...this.probeAccounts].filter(([c]) => !clouds || clouds.includes(c)));
    if (map.size === 0) return;
    await new BandwidthProbe({
      proxy: this.self,
      clouds: map,
      selector: this.selector,
      ...(this.o.probeBytes ? { bytes: this.o.probeBytes } : {}),
      ...(this.o.clock ? { clock: this.o.clock } : {}),
      onError: (cloud, err) => this.o.log.warn({ err, cloud }, 'bandwidth probe failed'),
    }).measureOnce();
    this.stats.probes += 1;
  }

  /** Send our figures (and the accounts of our clouds, to probe) to every peer we dial; take theirs. */
  async exchange(): Promise<void> {
    await Promise.all(
      this.dialable().map(async (peer) => {
        try {
          const s = this.sender(peer);
          const wait = new Promise<void>((resolve) => s.once('bandwidth', () => resolve()));
          await s.shareBandwidth({
            measurements: this.selector.own(this.self),
            probe: await Promise.all(
              [...this.localAccounts].map(async ([cloud, tokens]) => this.seal(peer, cloud, await tokens())),
            ),
          });
          await wait;
        } catch (err) {
          this.o.log.warn({ err, peer }, 'bandwidth exchange failed');
        }
      }),
    );
  }

  /** One period: probe our clouds, then exchange figures with the peers. */
  measureOnce(): Promise<void> {
    this.running ??= (async () => {
      await this.probe();
      await this.exchange();
    })().finally(() => (this.running = undefined));
    return this.running;
  }

  start(): void {
    const ms = this.o.intervalMs ?? 10 * 60 * 1000;
    if (ms <= 0) return;
    void this.measureOnce();
    this.timer = setInterval(() => void this.measureOnce(), ms);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running?.catch(() => undefined);
  }
}
