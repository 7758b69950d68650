/**
 * The source side of the inter-proxy link (docs/formats/inter-proxy.md, CoCloud §III-C
 * steps 1–3): one persistent, authenticated WebSocket to a destination proxy; per batch of
 * pending files it sends their metadata, takes the verdicts, and sends only what is
 * needed — small files in bundles, large new files in transfer blocks, large changed files
 * as rsync deltas against the destination's cached copy — compressed when Eq. 3–4 says so.
 * Many blocks are in flight; acks come back asynchronously; after a break it reconnects
 * (waits on Weft's one retry policy, `@weft/providers/backoff`) with the same session and
 * re-sends only the blocks the destination does not hold.
 */
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import pino, { type Logger } from 'pino';
import WebSocket from 'ws';
import { Backoff, parseRetryAfter } from '@weft/providers/backoff';
import { type Timer, systemTimer } from '../clock.ts';
import { PeerClosedError } from '../errors.ts';
import { checkServerProof, PeerAuthError, signUpgrade } from './auth.ts';
import { TRANSFER_BLOCK_BYTES } from './compare.ts';
import { AdaptiveCompression, LinkRateEstimator } from './compression.ts';
import {
  decodeFrame,
  DestinationMessage,
  FrameTag,
  parseMessage,
  PROTOCOL_VERSION,
  type SourceMessage,
  toBytes,
} from './frames.ts';
import {
  type BatchRun,
  failBatch,
  type FileOutcome,
  missingSignatures,
  newBatch,
  outcomes,
  type Pending,
  RestartBatch,
  sendPlanned,
  type SourceFile,
  takeResult,
  takeVerdicts,
  waitFor,
} from './sender-batch.ts';

export type { FileOutcome, SourceFile, TransferMode } from './sender-batch.ts';

export interface PeerSenderOptions {
  /** ws(s)://host:port/peer/v1/stream of the destination. */
  readonly url: string;
  readonly selfId: string;
  readonly peerId: string;
  readonly secret: string;
  /** Transfer block size S_b (default 4 MiB). */
  readonly blockBytes?: number;
  /** Unacknowledged blocks at most (default 16). */
  readonly maxInFlight?: number;
  /** Unacknowledged bytes at most (default 32 MiB). */
  readonly maxInFlightBytes?: number;
  /** Reconnect waits: drawn in [c/2, c), c doubling from min to max; a refusal's Retry-After
   * (503, 429) replaces one, capped at max. Default 50 ms … 2 s. */
  readonly reconnectMinMs?: number;
  readonly reconnectMaxMs?: number;
  /** Uniform in [0, 1): the backoff's jitter. Default Math.random (injected by tests). */
  readonly random?: () => number;
  /** Where the reconnect waits (default: setTimeout; injected by tests to see and drive them). */
  readonly timer?: Timer;
  readonly logger?: Logger;
}

export interface SenderStats {
  /** Blocks sent for the first time. */
  blocksSent: number;
  /** Blocks sent again after a break (not acknowledged before it). */
  blocksResent: number;
  /** Blocks the destination acknowledged. */
  blocksAcked: number;
  /** Bytes of binary frames written, re-sends included. */
  bytesSent: number;
  /** Bytes of text (control) frames written. */
  controlBytesSent: number;
  reconnects: number;
}

/**
 * Events: 'sent' (seq, first time), 'resent' (seq, after a break), 'ack' (seq),
 * 'welcome' ({ resumed, acked }) on every (re)connection.
 */
export class PeerSender extends EventEmitter {
  readonly stats: SenderStats = {
    blocksSent: 0,
    blocksResent: 0,
    blocksAcked: 0,
    bytesSent: 0,
    controlBytesSent: 0,
    reconnects: 0,
  };
  readonly session = randomBytes(16).toString('hex');
  readonly link = new LinkRateEstimator();
  readonly compression = new AdaptiveCompression(() => this.link.rate);
  private readonly log: Logger;
  private readonly blockBytes: number;
  private readonly maxInFlight: number;
  private readonly maxInFlightBytes: number;
  private socket: WebSocket | undefined;
  private ready = false;
  private closing = false;
  private everConnected = false;
  private readonly backoff: Backoff;
  private retryAfterMs: number | undefined; // a refusal's Retry-After, for the next wait
  private reconnectTimer: (() => void) | undefined;
  private nextSeq = 0;
  private nextBatch = 0;
  private readonly unacked = new Map<number, Pending>();
  private unackedBytes = 0;
  private readonly batches = new Map<number, BatchRun>();
  private readonly windowWaiters: (() => void)[] = [];
  private readonly readyWaiters: { resolve: () => void; reject: (e: Error) => void }[] = [];
  private nextRequest = 0;
  private readonly requests = new Map<
    number,
    {
      readonly msg: Extract<SourceMessage, { type: 'write' }>;
      readonly resolve: (m: Extract<DestinationMessage, { type: 'written' | 'write-failed' }>) => void;
    }
  >();

  constructor(private readonly options: PeerSenderOptions) {
    super();
    this.log = options.logger ?? pino({ level: 'silent' });
    this.blockBytes = options.blockBytes ?? TRANSFER_BLOCK_BYTES;
    this.maxInFlight = options.maxInFlight ?? 16;
    this.maxInFlightBytes = options.maxInFlightBytes ?? 32 * 1024 * 1024;
    const baseMs = options.reconnectMinMs ?? 50;
    this.backoff = new Backoff(
      { baseMs, capMs: Math.max(baseMs, options.reconnectMaxMs ?? 2000), jitter: 'equal' },
      options.random,
    );
  }

  /** Open the connection (resolves once the destination proved itself). */
  connect(): Promise<void> {
    if (this.ready) return Promise.resolve();
    const p = new Promise<void>((resolve, reject) => this.readyWaiters.push({ resolve, reject }));
    if (!this.socket && !this.reconnectTimer) this.open();
    return p;
  }

  get connected(): boolean {
    return this.ready;
  }

  /** Blocks not acknowledged yet. */
  get inFlight(): number {
    return this.unacked.size;
  }

  /** Cut the current connection (tests, and a peer that misbehaves); it reconnects by itself. */
  dropConnection(): void {
    this.socket?.terminate();
  }

  private open(): void {
    const { headers, nonce } = signUpgrade(this.options.selfId, this.options.peerId, this.options.secret);
    const ws = new WebSocket(this.options.url, {
      headers,
      maxPayload: 64 * 1024 * 1024,
      perMessageDeflate: false,
    });
    this.socket = ws;
    let welcomed = false;
    ws.on('open', () => {
      const hello: SourceMessage = {
        type: 'hello',
        version: PROTOCOL_VERSION,
        proxy: this.options.selfId,
        session: this.session,
      };
      this.sendControl(hello, ws);
    });
    ws.on('message', (data: WebSocket.RawData, isBinary: boolean) => {
      const bytes = toBytes(data);
      if (isBinary) {
        if (welcomed) this.onBinary(bytes);
        return;
      }
      const msg = parseMessage(DestinationMessage, Buffer.from(bytes).toString('utf8'));
      if (!msg) return this.log.warn('invalid message from peer');
      if (!welcomed) {
        if (msg.type !== 'welcome' || msg.session !== this.session) {
          this.log.warn({ msg }, 'peer did not welcome');
          return void ws.terminate();
        }
        if (
          !checkServerProof(
            this.options.secret,
            this.options.peerId,
            this.options.selfId,
            nonce,
            this.session,
            msg.proof,
          )
        ) {
          this.log.error(
            { peer: this.options.peerId },
            'peer failed to prove the shared secret: disconnecting',
          );
          this.failReady(new PeerAuthError(`peer ${this.options.peerId} failed authentication`));
          this.closing = true;
          return void ws.terminate();
        }
        welcomed = true;
        this.onWelcome(ws, msg.resumed, msg.acked);
        return;
      }
      this.onMessage(msg);
    });
    ws.on('unexpected-response', (_req, res) => {
      this.log.warn({ status: res.statusCode }, 'peer refused the connection');
      if (res.statusCode === 401 || res.statusCode === 403) {
        this.failReady(
          new PeerAuthError(`peer ${this.options.peerId} refused our credentials (${res.statusCode})`),
        );
      }
      const retryAfter = res.headers['retry-after'];
      this.retryAfterMs = parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter);
      ws.terminate();
    });
    ws.on('error', (err) => this.log.debug({ err }, 'peer socket error'));
    ws.on('close', () => {
      // Only the current connection's end matters (a replaced one may close late).
      if (this.socket !== ws) return;
      this.socket = undefined;
      this.ready = false;
      if (this.closing) return;
      const delay = this.backoff.next(this.retryAfterMs);
      this.retryAfterMs = undefined;
      this.reconnectTimer = (this.options.timer ?? systemTimer)(() => {
        this.reconnectTimer = undefined;
        if (!this.closing) this.open();
      }, delay);
    });
  }

  private failReady(e: Error): void {
    for (const w of this.readyWaiters.splice(0)) w.reject(e);
  }

  private onWelcome(ws: WebSocket, resumed: boolean, acked: readonly number[]): void {
    if (this.everConnected) this.stats.reconnects += 1;
    this.everConnected = true;
    this.backoff.reset();
    if (!resumed && this.batches.size > 0) {
      // The destination lost this session (it restarted): every open batch starts over.
      for (const b of this.batches.values()) {
        failBatch(b, new RestartBatch('destination restarted'));
      }
      this.unacked.clear();
      this.unackedBytes = 0;
      this.releaseWindow();
    }
    this.emit('welcome', { resumed, acked });
    const held = new Set(acked);
    for (const p of [...this.unacked.values()]) if (held.has(p.seq)) this.onAck(p.seq);
    this.ready = true;
    // Batches still waiting for verdicts or signatures ask again; the destination answers again.
    for (const b of this.batches.values()) {
      if (!b.verdicts || missingSignatures(b)) this.sendBatchMessage(b, ws);
    }
    for (const p of [...this.unacked.values()].sort((a, b) => a.seq - b.seq)) this.transmit(p, ws);
    // Writes whose answer was lost in the break are asked again: they are conditional, so a
    // write that did happen comes back PreconditionFailed/AlreadyExists and the mirror's
    // write path finds its content already there.
    for (const r of this.requests.values()) this.sendControl(r.msg, ws);
    for (const w of this.readyWaiters.splice(0)) w.resolve();
  }

  private onBinary(bytes: Uint8Array): void {
    let f;
    try {
      f = decodeFrame(bytes, 64 * 1024 * 1024);
    } catch (err) {
      return this.log.warn({ err }, 'bad frame from peer');
    }
    if (f.tag !== FrameTag.Signature || f.session !== this.session) return;
    const b = this.batches.get(f.batch);
    if (!b) return;
    b.signatures.set(f.file, f.payload.slice());
    for (const w of b.wake) w();
  }

  private onMessage(msg: DestinationMessage): void {
    switch (msg.type) {
      case 'verdicts': {
        const b = this.batches.get(msg.batch);
        if (b) takeVerdicts(b, msg.verdicts);
        return;
      }
      case 'ack':
        return this.onAck(msg.seq);
      case 'bandwidth':
        this.emit('bandwidth', msg.measurements);
        return;
      case 'written':
      case 'write-failed': {
        const r = this.requests.get(msg.id);
        if (!r) return;
        this.requests.delete(msg.id);
        r.resolve(msg);
        return;
      }
      case 'nack': {
        const p = this.unacked.get(msg.seq);
        if (!p) return;
        this.log.warn({ seq: msg.seq, code: msg.code, message: msg.message }, 'block refused by peer');
        p.nacks += 1;
        const b = this.batches.get(p.batch);
        if (p.nacks > 3 && b) {
          failBatch(b, new Error(`block ${p.seq} refused: ${msg.code} ${msg.message}`));
          return;
        }
        if (this.socket && this.ready) this.transmit(p, this.socket);
        return;
      }
      case 'committed':
      case 'failed': {
        const b = this.batches.get(msg.batch);
        if (b) takeResult(b, msg);
        return;
      }
      case 'error': {
        this.log.warn({ code: msg.code, message: msg.message }, 'peer reported an error');
        const b = msg.batch === undefined ? undefined : this.batches.get(msg.batch);
        if (b) {
          failBatch(b, new Error(`peer refused batch ${b.id}: ${msg.code} ${msg.message}`));
        }
        return;
      }
      case 'welcome':
        return;
    }
  }

  private onAck(seq: number): void {
    const p = this.unacked.get(seq);
    if (!p) return;
    this.unacked.delete(seq);
    this.unackedBytes -= p.frame.byteLength;
    this.stats.blocksAcked += 1;
    if (p.sent) this.link.record(p.frame.byteLength, p.sentAt);
    this.emit('ack', seq);
    this.releaseWindow();
  }

  private releaseWindow(): void {
    for (const w of this.windowWaiters.splice(0)) w();
  }

  private sendControl(msg: SourceMessage, ws: WebSocket | undefined = this.socket): void {
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    const text = JSON.stringify(msg);
    this.stats.controlBytesSent += Buffer.byteLength(text);
    ws.send(text);
  }

  private sendBatchMessage(b: BatchRun, ws: WebSocket | undefined = this.socket): void {
    this.sendControl(
      {
        type: 'batch',
        batch: b.id,
        files: b.files.map((f) => ({ path: f.path, size: f.size, sha256: f.sha256 })),
      },
      ws,
    );
  }

  private transmit(p: Pending, ws: WebSocket): void {
    if (ws.readyState !== WebSocket.OPEN) return;
    const again = p.sent;
    if (again) this.stats.blocksResent += 1;
    else this.stats.blocksSent += 1;
    p.sent = true;
    p.sentAt = performance.now();
    this.stats.bytesSent += p.frame.byteLength;
    ws.send(p.frame);
    this.emit(again ? 'resent' : 'sent', p.seq);
  }

  /** Queue one block: waits while the window is full; sends now when connected. */
  private async enqueue(b: BatchRun, make: (seq: number) => Uint8Array): Promise<number> {
    while (
      this.unacked.size >= this.maxInFlight ||
      (this.unacked.size > 0 && this.unackedBytes >= this.maxInFlightBytes)
    ) {
      await new Promise<void>((r) => this.windowWaiters.push(r));
      if (b.failure) throw b.failure;
    }
    const seq = this.nextSeq++;
    const frame = make(seq);
    const p: Pending = { seq, frame, batch: b.id, sent: false, sentAt: 0, nacks: 0 };
    this.unacked.set(seq, p);
    this.unackedBytes += frame.byteLength;
    if (this.ready && this.socket) this.transmit(p, this.socket);
    return frame.byteLength;
  }

  /**
   * Send one batch of pending files; resolves with each file's outcome once the
   * destination reported it (committed, failed) or found it unchanged.
   */
  async send(files: readonly SourceFile[]): Promise<FileOutcome[]> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.sendOnce(files);
      } catch (e) {
        if (!(e instanceof RestartBatch) || attempt >= 3) throw e;
      }
    }
  }

  private async sendOnce(files: readonly SourceFile[]): Promise<FileOutcome[]> {
    if (this.closing) throw new PeerClosedError('sender closed');
    if (!this.socket && !this.reconnectTimer) this.open();
    const b = newBatch(this.nextBatch++, files);
    this.batches.set(b.id, b);
    try {
      if (this.ready) this.sendBatchMessage(b);
      await waitFor(b, () => b.verdicts !== undefined);
      const { modes, wire, compressed } = await sendPlanned(
        {
          session: this.session,
          blockBytes: this.blockBytes,
          compression: this.compression,
          enqueue: (run, make) => this.enqueue(run, make),
        },
        b,
        b.verdicts ?? [],
      );
      const expected = b.files.filter((f) => modes.get(f.path) !== 'unchanged');
      await waitFor(b, () => expected.every((f) => b.results.has(f.path)));
      this.sendControl({ type: 'done', batch: b.id });
      return outcomes(b, modes, wire, compressed);
    } finally {
      this.batches.delete(b.id);
      for (const [seq, p] of this.unacked) {
        if (p.batch === b.id) {
          this.unacked.delete(seq);
          this.unackedBytes -= p.frame.byteLength;
        }
      }
      this.releaseWindow();
    }
  }

  /** Send our bandwidth figures (and accounts to probe); the peer answers with its own ('bandwidth' event). */
  async shareBandwidth(msg: Omit<Extract<SourceMessage, { type: 'bandwidth' }>, 'type'>): Promise<void> {
    await this.connect();
    this.sendControl({ type: 'bandwidth', ...msg });
  }

  /**
   * Ask the peer to write content it holds in its cache (sent before with `send`) to one of
   * its clouds; resolves with its answer, re-asked after a break until answered.
   */
  async write(
    msg: Omit<Extract<SourceMessage, { type: 'write' }>, 'type' | 'id'>,
  ): Promise<Extract<DestinationMessage, { type: 'written' | 'write-failed' }>> {
    await this.connect();
    const id = this.nextRequest;
    this.nextRequest = (this.nextRequest + 1) % 0x1_0000_0000;
    const full = { type: 'write' as const, id, ...msg };
    return new Promise((resolve) => {
      this.requests.set(id, { msg: full, resolve });
      if (this.ready) this.sendControl(full);
    });
  }

  async close(): Promise<void> {
    this.closing = true;
    this.reconnectTimer?.();
    this.reconnectTimer = undefined;
    this.failReady(new PeerClosedError('sender closed'));
    for (const r of this.requests.values())
      r.resolve({ type: 'write-failed', id: r.msg.id, code: 'Transient', message: 'sender closed' });
    this.requests.clear();
    for (const b of this.batches.values()) {
      failBatch(b, new PeerClosedError('sender closed'));
    }
    this.releaseWindow();
    const ws = this.socket;
    if (ws && ws.readyState !== WebSocket.CLOSED) {
      await new Promise<void>((resolve) => {
        ws.once('close', () => resolve());
        ws.terminate();
      });
    }
  }
}
