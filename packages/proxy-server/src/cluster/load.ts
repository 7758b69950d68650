/**
 * What one proxy instance reports about its load (HyCloud §III-C, Eq. 7–8): BW_o, its overall
 * bandwidth, and BW_a, what is left of it now.
 *
 * - Throughput: the client bytes the server moved (weft_bytes_total{tier="client"}, in + out:
 *   block uploads, downloads, bundles, deltas), sampled at each heartbeat and averaged over a
 *   sliding window (cluster.windowMs, default 5 s).
 * - BW_o (`measuredBps`): `cluster.capacityBps` when declared (an operator who knows the link:
 *   a NIC's line rate, an instance type's network allowance); otherwise measured — the most
 *   this instance has moved over one window since it started, never below
 *   `cluster.minCapacityBps` (default 12.5 MB/s, HyCloud's 100 Mbit/s client links), so a fresh
 *   instance is not reported as having no bandwidth at all.
 * - BW_a (`availableBps`) = max(0, BW_o − throughput).
 * - Active transfers: requests moving file content now (blocks, downloads, bundles, deltas)
 *   plus transfers that received a block in the last few seconds (a client sends the next
 *   block right after the ack) — what a draining instance waits for.
 */
import type { FastifyInstance } from 'fastify';

export interface LoadMeterOptions {
  windowMs: number;
  /** Declared BW_o; undefined = measured. */
  capacityBps?: number;
  minCapacityBps: number;
}

export class LoadMeter {
  private readonly samples: { atMs: number; bytes: number }[] = [];
  private lastTotal: number | undefined;
  private peakBps = 0;

  constructor(private readonly o: LoadMeterOptions) {}

  /** Feed the running total of client bytes moved, read at `nowMs`. */
  sample(totalBytes: number, nowMs: number): void {
    const bytes = this.lastTotal === undefined ? 0 : Math.max(0, totalBytes - this.lastTotal);
    this.lastTotal = totalBytes;
    this.samples.push({ atMs: nowMs, bytes });
    // The oldest sample kept opens the window (its bytes came before it).
    while (this.samples.length > 1 && this.samples[0]!.atMs < nowMs - this.o.windowMs) this.samples.shift();
    const t = this.throughputBps();
    // Only a full window counts as a measurement of what the instance can move.
    const span = nowMs - this.samples[0]!.atMs;
    if (span >= this.o.windowMs * 0.75) this.peakBps = Math.max(this.peakBps, t);
  }

  /** Bytes per second over the window (the first sample only opens it). */
  throughputBps(): number {
    if (this.samples.length < 2) return 0;
    const first = this.samples[0]!;
    const last = this.samples.at(-1)!;
    const ms = last.atMs - first.atMs;
    if (ms <= 0) return 0;
    let bytes = 0;
    for (let i = 1; i < this.samples.length; i++) bytes += this.samples[i]!.bytes;
    return Math.round((bytes * 1000) / ms);
  }

  /** BW_o. */
  measuredBps(): number {
    return Math.round(this.o.capacityBps ?? Math.max(this.o.minCapacityBps, this.peakBps));
  }

  /** BW_a. */
  availableBps(): number {
    return Math.max(0, this.measuredBps() - this.throughputBps());
  }
}

/** Routes that move file content (the transfers a draining instance lets finish). */
const TRANSFER_ROUTE = /^\/v1\/(transfers|files|bundles|deltas|versions\/content)(\/|$|\?)/;
const BLOCK_ROUTE = /^\/v1\/transfers\/([0-9a-f]{32})\/blocks/;

export class ActiveTransfers {
  /** Content requests in flight, but blocks (counted by transfer below). */
  private inFlight = 0;
  /** Transfer id → its blocks in flight. */
  private readonly blocks = new Map<string, number>();
  /** Transfer id → when its last block started or ended. */
  private readonly recent = new Map<string, number>();

  constructor(
    private readonly lingerMs = 5000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Count this app's transfer requests (install before the routes are registered). */
  install(app: FastifyInstance): void {
    app.addHook('onRequest', async (req, reply) => {
      const url = req.url;
      if (!TRANSFER_ROUTE.test(url)) return;
      const id = BLOCK_ROUTE.exec(url)?.[1];
      if (id === undefined) this.inFlight++;
      else {
        this.blocks.set(id, (this.blocks.get(id) ?? 0) + 1);
        this.recent.set(id, this.now());
      }
      // 'close' fires once whether the response finished or the client went away.
      reply.raw.once('close', () => {
        if (id === undefined) {
          this.inFlight--;
          return;
        }
        const n = (this.blocks.get(id) ?? 1) - 1;
        if (n > 0) this.blocks.set(id, n);
        else this.blocks.delete(id);
        this.recent.set(id, this.now());
      });
    });
  }

  /** Content requests in flight plus transfers with a block in flight or in the last lingerMs. */
  count(): number {
    const cutoff = this.now() - this.lingerMs;
    for (const [id, at] of this.recent) if (at < cutoff && !this.blocks.has(id)) this.recent.delete(id);
    return this.inFlight + this.recent.size;
  }
}
