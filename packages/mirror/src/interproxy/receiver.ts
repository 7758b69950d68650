/**
 * The destination side of the inter-proxy link (docs/formats/inter-proxy.md, CoCloud
 * §III-C steps 2–5): answers metadata batches with verdicts (and the signatures of changed
 * files' cached copies), stores blocks in its spool and acknowledges each one
 * asynchronously, rebuilds files (de-bundling, reassembly, rsync patch against the cache),
 * checks their SHA-256, moves them in atomically, hands them to `deliver` (the upload to
 * this proxy's clouds), updates the cache and, when idle, the block-size history.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import pino, { type Logger } from 'pino';
import type WebSocket from 'ws';
import { decodeBundle } from '@weft/wire/bundle';
import { WireFormatError } from '@weft/wire/errors';
import { PeerAuthenticator, serverProof } from './auth.ts';
import {
  addPiece,
  assemblePart,
  type BatchState,
  dropBatch,
  FileFailure,
  lockPaths,
  type Session,
  Semaphore,
} from './receiver-parts.ts';
import { answerRequest, type PeerRequest, type PeerRequestHandler } from './receiver-requests.ts';
import { PeerCache } from './cache.ts';
import { BatchError, compareBatch, type FileMeta, type Verdict } from './compare.ts';
import {
  type DestinationMessage,
  decodeFrame,
  encodeFrame,
  FrameTag,
  invalidBatchId,
  NO_FILE,
  parseMessage,
  PROTOCOL_VERSION,
  type ResultCode,
  SourceMessage,
  toBytes,
} from './frames.ts';

export type { PeerRequest, PeerRequestContext, PeerRequestHandler } from './receiver-requests.ts';
export { toBytes } from './frames.ts';

export interface ReceivedFile {
  readonly path: string;
  readonly sha256: string;
  readonly size: number;
  /** The content, read-only (the cache's object file). */
  readonly file: string;
  /** The proxy it came from. */
  readonly peer: string;
}

export interface PeerReceiverOptions {
  readonly selfId: string;
  /** Peer id → the secret configured for that pair. */
  readonly peers: ReadonlyMap<string, string>;
  /** Cache, spool and history live here. */
  readonly dir: string;
  /** Upload a received file to this proxy's clouds; a throw reports the file failed (UPLOAD). */
  readonly deliver?: (file: ReceivedFile) => Promise<void>;
  /** Deliveries at once (default 8). */
  readonly deliverConcurrency?: number;
  /** Largest binary frame accepted (default 4 MiB + 64 KiB). */
  readonly maxFrameBytes?: number;
  /** Largest raw delta accepted (default 1 GiB). */
  readonly maxDeltaBytes?: number;
  readonly logger?: Logger;
  readonly now?: () => number;
}

export interface ReceiverStats {
  framesReceived: number;
  /** Frames whose seq was already stored (a re-send after a lost ack). */
  duplicateFrames: number;
  blocksStored: number;
  filesCommitted: number;
  filesFailed: number;
  bytesReceived: number;
}

export class PeerReceiver {
  readonly stats: ReceiverStats = {
    framesReceived: 0,
    duplicateFrames: 0,
    blocksStored: 0,
    filesCommitted: 0,
    filesFailed: 0,
    bytesReceived: 0,
  };
  readonly auth: PeerAuthenticator;
  deliver: ((file: ReceivedFile) => Promise<void>) | undefined;
  /** Answers `bandwidth` and `write` requests (the proxy's routing); unset: they are refused. */
  handleRequest: PeerRequestHandler | undefined;
  private readonly sessions = new Map<string, Session>();
  /** Path → completion of the file in flight there (per-path order across batches). */
  private readonly pathBusy = new Map<string, Promise<void>>();
  private readonly delivering: Semaphore;
  private readonly log: Logger;
  private readonly maxFrameBytes: number;
  private readonly maxDeltaBytes: number;
  private idle: Promise<void> = Promise.resolve();
  private closed = false;

  private constructor(
    private readonly options: PeerReceiverOptions,
    readonly cache: PeerCache,
  ) {
    this.auth = new PeerAuthenticator(options.selfId, options.peers, options.now);
    this.deliver = options.deliver;
    this.delivering = new Semaphore(options.deliverConcurrency ?? 8);
    this.log = options.logger ?? pino({ level: 'silent' });
    this.maxFrameBytes = options.maxFrameBytes ?? 4 * 1024 * 1024 + 64 * 1024;
    this.maxDeltaBytes = options.maxDeltaBytes ?? 1024 * 1024 * 1024;
  }

  static async open(options: PeerReceiverOptions): Promise<PeerReceiver> {
    const cache = await PeerCache.open(nodePath.join(options.dir, 'cache'));
    // Spooled blocks of sessions from an earlier run are useless: their senders start over.
    await fsp.rm(nodePath.join(options.dir, 'spool'), { recursive: true, force: true });
    await fsp.rm(nodePath.join(options.dir, 'cache', 'tmp'), { recursive: true, force: true });
    await fsp.mkdir(nodePath.join(options.dir, 'cache', 'tmp'), { recursive: true });
    return new PeerReceiver(options, cache);
  }

  /** Serve one authenticated connection (after `auth.verify` accepted its upgrade request). */
  accept(socket: WebSocket, who: { peer: string; nonce: string }): void {
    let session: Session | undefined;
    socket.on('message', (data: WebSocket.RawData, isBinary: boolean) => {
      const bytes = toBytes(data);
      if (!isBinary) {
        const text = Buffer.from(bytes).toString('utf8');
        const msg = parseMessage(SourceMessage, text);
        if (!msg) {
          // An invalid batch is refused whole, by its id when it has one, so the source gives it up.
          const batch = invalidBatchId(text);
          return this.sendTo(socket, {
            type: 'error',
            code: batch === undefined ? 'BAD_MESSAGE' : 'BAD_BATCH',
            message:
              batch === undefined ? 'unknown or invalid message' : `batch ${batch} breaks the batch rules`,
            ...(batch === undefined ? {} : { batch }),
          });
        }
        if (msg.type === 'hello') {
          if (session)
            return this.sendTo(socket, { type: 'error', code: 'BAD_MESSAGE', message: 'hello twice' });
          if (msg.version !== PROTOCOL_VERSION) {
            this.sendTo(socket, {
              type: 'error',
              code: 'VERSION',
              message: `version ${msg.version} unsupported`,
            });
            socket.close(1002, 'unsupported version');
            return;
          }
          session = this.hello(socket, who, msg.session);
          return;
        }
        if (!session)
          return this.sendTo(socket, { type: 'error', code: 'BAD_MESSAGE', message: 'hello first' });
        if (msg.type === 'batch') this.onBatch(session, msg.batch, msg.files);
        else if (msg.type === 'done') this.onDone(session, msg.batch);
        else void this.onRequest(session, msg);
        return;
      }
      if (!session)
        return this.sendTo(socket, { type: 'error', code: 'BAD_MESSAGE', message: 'hello first' });
      this.onFrame(session, bytes).catch((err: unknown) => this.log.error({ err }, 'peer frame failed'));
    });
    socket.on('close', () => {
      if (session?.socket === socket) session.socket = undefined;
    });
    socket.on('error', (err) => this.log.warn({ err, peer: who.peer }, 'peer socket error'));
  }

  private hello(socket: WebSocket, who: { peer: string; nonce: string }, id: string): Session {
    // Keyed by peer too: one peer cannot take over (or reset) another's session.
    const key = `${who.peer}\u0000${id}`;
    let s = this.sessions.get(key);
    const resumed = s !== undefined;
    if (!s) {
      s = {
        id,
        peer: who.peer,
        dir: nodePath.join(this.options.dir, 'spool', id + '-' + randomBytes(4).toString('hex')),
        socket: undefined,
        acked: new Set(),
        seqBatch: new Map(),
        batches: new Map(),
      };
      this.sessions.set(key, s);
    }
    const old = s.socket;
    s.socket = socket;
    if (old && old !== socket) old.terminate();
    const secret = this.auth.secretOf(who.peer) ?? '';
    this.sendTo(socket, {
      type: 'welcome',
      version: PROTOCOL_VERSION,
      proxy: this.options.selfId,
      session: id,
      proof: serverProof(secret, this.options.selfId, who.peer, who.nonce, id),
      resumed,
      acked: [...s.acked].sort((a, b) => a - b),
    });
    // Results the source may have missed while disconnected.
    for (const b of s.batches.values()) for (const r of b.results.values()) this.sendTo(socket, r);
    return s;
  }

  private onBatch(s: Session, id: number, files: FileMeta[]): void {
    const existing = s.batches.get(id);
    if (existing) {
      // A re-sent batch (the source lost the verdicts or signatures in a break): answer again.
      void existing.prepared.then(() => this.sendVerdicts(s, existing));
      return;
    }
    let metas: FileMeta[];
    try {
      // Validate before anything is touched: a bad batch is refused whole.
      compareBatch(files, { get: () => undefined });
      metas = files;
    } catch (e) {
      const index = e instanceof BatchError ? e.index : 0;
      this.send(s, {
        type: 'error',
        code: 'BAD_BATCH',
        message: `batch ${id}: ${(e as Error).message} (${index})`,
        batch: id,
      });
      return;
    }
    const { release, waits } = lockPaths(this.pathBusy, metas);
    const state: BatchState = {
      id,
      files: metas,
      verdicts: undefined,
      signatures: new Map(),
      results: new Map(),
      parts: new Map(),
      taken: new Set(),
      release,
      prepared: Promise.all(waits).then(async () => {
        const verdicts = compareBatch(metas, this.cache, (p) => this.cache.predictor.choose(p));
        for (const [i, v] of verdicts.entries()) {
          if (v.verdict === 'changed') {
            this.cache.pin(v.basisSha256);
            state.signatures.set(i, await this.cache.signature(v.basisSha256, v.blockSize));
          } else if (v.verdict === 'unchanged') {
            state.taken.add(i);
            void this.unchangedElsewhere(s, state, i);
          }
        }
        state.verdicts = verdicts;
      }),
    };
    s.batches.set(id, state);
    state.prepared.then(
      () => this.sendVerdicts(s, state),
      (err: unknown) => {
        this.log.error({ err }, 'peer batch compare failed');
        this.send(s, {
          type: 'error',
          code: 'INTERNAL',
          message: `batch ${id}: ${(err as Error).message}`,
          batch: id,
        });
        this.onDone(s, id);
      },
    );
  }

  /** `unchanged` because the content is cached at another path (a rename): make it current here. */
  private async unchangedElsewhere(s: Session, b: BatchState, i: number): Promise<void> {
    const f = b.files[i];
    if (!f) return;
    try {
      if (this.cache.get(f.path)?.sha256 !== f.sha256) {
        await this.deliverAndCommit(s, f, this.cache.objectPath(f.sha256));
      }
    } catch (err) {
      this.log.warn({ err, path: f.path }, 'copy of unchanged content failed');
    } finally {
      b.release.get(i)?.();
    }
  }

  private sendVerdicts(s: Session, b: BatchState): void {
    if (!b.verdicts) return;
    this.send(s, { type: 'verdicts', batch: b.id, verdicts: b.verdicts });
    for (const [i, sig] of b.signatures) {
      const frame = encodeFrame({
        tag: FrameTag.Signature,
        session: s.id,
        seq: 0,
        batch: b.id,
        file: i,
        payload: sig,
      });
      if (s.socket?.readyState === 1) s.socket.send(frame);
    }
  }

  private onDone(s: Session, id: number): void {
    dropBatch(this.cache, s, id);
  }

  private async onFrame(s: Session, bytes: Uint8Array): Promise<void> {
    this.stats.framesReceived += 1;
    this.stats.bytesReceived += bytes.byteLength;
    let frame;
    try {
      frame = decodeFrame(bytes, this.maxFrameBytes);
    } catch (e) {
      this.send(s, { type: 'error', code: 'BAD_FRAME', message: (e as Error).message });
      return;
    }
    const nack = (code: string, message: string): void =>
      this.send(s, { type: 'nack', seq: frame.seq, code, message: message.slice(0, 2000) });
    if (frame.session !== s.id) return nack('BAD_SESSION', 'frame for another session');
    if (frame.tag === FrameTag.Signature) return nack('BAD_FRAME', 'signatures go the other way');
    if (s.acked.has(frame.seq)) {
      this.stats.duplicateFrames += 1;
      this.send(s, { type: 'ack', seq: frame.seq });
      return;
    }
    const b = s.batches.get(frame.batch);
    if (!b?.verdicts) return nack('UNKNOWN_BATCH', `no verdicts were sent for batch ${frame.batch}`);
    try {
      if (frame.tag === FrameTag.Bundle) {
        if (frame.file !== NO_FILE) return nack('BAD_FRAME', 'a bundle names no file');
        await this.onBundle(s, b, frame.payload);
      } else {
        await this.onPiece(s, b, frame.tag === FrameTag.Whole ? 'whole' : 'delta', frame.file, frame.payload);
      }
    } catch (e) {
      if (e instanceof WireFormatError || e instanceof FileFailure) return nack('BAD_BLOCK', e.message);
      // Not stored (e.g. a full disk): the source re-sends it, a few times.
      this.log.error({ err: e }, 'peer block could not be stored');
      return nack('INTERNAL', (e as Error).message);
    }
    s.acked.add(frame.seq);
    s.seqBatch.set(frame.seq, b.id);
    this.stats.blocksStored += 1;
    this.send(s, { type: 'ack', seq: frame.seq });
  }

  private expect(b: BatchState, i: number): { file: FileMeta; verdict: Verdict } {
    const file = b.files[i];
    const verdict = b.verdicts?.[i];
    if (!file || !verdict) throw new FileFailure('FORMAT', `no file ${i} in batch ${b.id}`);
    if (verdict.verdict === 'unchanged') throw new FileFailure('FORMAT', `${file.path} was unchanged`);
    return { file, verdict };
  }

  private async onBundle(s: Session, b: BatchState, payload: Uint8Array): Promise<void> {
    const bundle = decodeBundle(payload); // checks the CRC and every entry's SHA-256
    const byPath = new Map(b.files.map((f, i) => [f.path, i]));
    const items = bundle.entries.map((e) => {
      const i = byPath.get(e.path);
      if (i === undefined) throw new FileFailure('FORMAT', `${e.path} is not in batch ${b.id}`);
      const { file } = this.expect(b, i);
      if (file.sha256 !== e.sha256 || file.size !== e.content.byteLength)
        throw new FileFailure('CHECKSUM', `${e.path} differs from its batch entry`);
      return { i, file, content: e.content };
    });
    // Durable before the ack: each file becomes its object (atomic) first.
    for (const it of items) this.cache.pin(it.file.sha256);
    try {
      const stored = await Promise.all(
        items.map(async (it) => ({ ...it, obj: await this.cache.putBytes(it.content, it.file.sha256) })),
      );
      for (const it of stored) {
        if (b.taken.has(it.i)) continue;
        b.taken.add(it.i);
        void this.finish(s, b, it.i, async () => it.obj);
      }
    } finally {
      // finish() holds its own pin from here on.
      for (const it of items) this.cache.unpin(it.file.sha256);
    }
  }

  private async onPiece(
    s: Session,
    b: BatchState,
    kind: 'whole' | 'delta',
    i: number,
    payload: Uint8Array,
  ): Promise<void> {
    const { file, verdict } = this.expect(b, i);
    if (kind === 'delta' && verdict.verdict !== 'changed')
      throw new FileFailure('FORMAT', `${file.path} is not changed`);
    const limit = kind === 'whole' ? file.size : this.maxDeltaBytes;
    const done = await addPiece(b, s.dir, i, kind, payload, file, limit);
    if (!done) return;
    const { part, total } = done;
    void this.finish(s, b, i, () => assemblePart(this.cache, this.maxDeltaBytes, part, file, verdict, total));
  }

  private async finish(s: Session, b: BatchState, i: number, produce: () => Promise<string>): Promise<void> {
    const file = b.files[i];
    const verdict = b.verdicts?.[i];
    if (!file || !verdict) return;
    let result: DestinationMessage;
    // Its object must not be removed (as another path's old content) before it is committed.
    this.cache.pin(file.sha256);
    try {
      const obj = await produce();
      await this.deliverAndCommit(s, file, obj);
      result = { type: 'committed', batch: b.id, path: file.path, sha256: file.sha256 };
      this.stats.filesCommitted += 1;
    } catch (e) {
      const code: ResultCode =
        e instanceof FileFailure ? e.code : e instanceof WireFormatError ? 'FORMAT' : 'INTERNAL';
      if (!(e instanceof FileFailure)) this.log.warn({ err: e, path: file.path }, 'peer file failed');
      result = {
        type: 'failed',
        batch: b.id,
        path: file.path,
        code,
        message: (e as Error).message.slice(0, 2000),
      };
      this.stats.filesFailed += 1;
    } finally {
      b.parts.delete(i);
      this.cache.unpin(file.sha256);
      void this.cache.dropIfUnused(file.sha256);
    }
    b.results.set(i, result);
    this.send(s, result);
    b.release.get(i)?.();
    if (verdict.verdict === 'changed') {
      const basis = verdict.basisSha256;
      // Step 5: measure when idle what each candidate block size would have saved (Eq. 1–2).
      this.idle = this.idle
        .then(async () => {
          if (this.closed || result.type !== 'committed') return;
          await this.cache.measureRatios(file.path, basis, file.sha256);
        })
        .catch((err: unknown) => this.log.warn({ err }, 'block-size history update failed'))
        .finally(() => {
          this.cache.unpin(basis);
          void this.cache.dropIfUnused(basis);
        });
    }
  }

  private async deliverAndCommit(s: Session, file: FileMeta, obj: string): Promise<void> {
    const deliver = this.deliver;
    if (deliver) {
      try {
        await this.delivering.run(() =>
          deliver({ path: file.path, sha256: file.sha256, size: file.size, file: obj, peer: s.peer }),
        );
      } catch (e) {
        throw new FileFailure('UPLOAD', `${file.path}: ${(e as Error).message}`);
      }
    }
    await this.cache.commit(file.path, file.sha256, file.size);
  }

  private async onRequest(s: Session, msg: PeerRequest): Promise<void> {
    const secret = this.auth.secretOf(s.peer) ?? '';
    const answer = await answerRequest(this.handleRequest, this.cache, this.log, s.peer, secret, msg);
    if (answer) this.send(s, answer);
  }

  /** Resolves when the block-size history updates queued so far are done. */
  whenIdle(): Promise<void> {
    return this.idle;
  }

  private send(s: Session, msg: DestinationMessage): void {
    if (s.socket) this.sendTo(s.socket, msg);
  }

  private sendTo(socket: WebSocket, msg: DestinationMessage): void {
    if (socket.readyState === 1) socket.send(JSON.stringify(msg));
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const s of this.sessions.values()) {
      s.socket?.terminate();
      for (const b of s.batches.values())
        for (const p of b.parts.values()) await p.handle?.then((h) => h.close()).catch(() => undefined);
    }
    this.sessions.clear();
    await this.idle;
    this.cache.close();
  }
}
