/**
 * Ordered apply (HyCloud §III-C). Operations on the same path or on related paths (one
 * inside the other; both ends of a move) run strictly in arrival order, one at a time
 * (stop-and-wait). Unrelated operations run in parallel, up to `concurrency` at once, and
 * when more are ready than can run, the one with the smallest
 *   FOP(x) = arrival(x) + estimatedTransferTime(x)                         (Eq. 6)
 * goes first. Transfer time = bytes / bandwidth, the bandwidth being the harmonic mean of
 * the last 5 measured transfers (Eq. 4); directory operations get a small fixed time.
 */
import { isWithin } from '@weft/providers/paths';

export interface ScheduledOp<T> {
  /** Namespace the paths belong to (operations in different namespaces never relate). */
  readonly namespace: string;
  /** Every path the op touches (a move: both ends). */
  readonly paths: readonly string[];
  /** Bytes to move through the object tier; 0 for directory and metadata operations. */
  readonly bytes: number;
  readonly run: () => Promise<T>;
}

interface Pending {
  readonly namespace: string;
  readonly paths: readonly string[];
  readonly arrival: number;
  readonly order: number;
  readonly fop: number;
  readonly start: () => void;
  running: boolean;
}

/** Harmonic mean of the last K bandwidth samples (bytes per ms). */
export class BandwidthEstimator {
  private readonly samples: number[] = [];

  constructor(
    private readonly k = 5,
    private readonly initialBytesPerMs = 50_000,
  ) {}

  record(bytes: number, ms: number): void {
    if (bytes <= 0 || ms <= 0) return;
    this.samples.push(bytes / ms);
    if (this.samples.length > this.k) this.samples.shift();
  }

  bytesPerMs(): number {
    if (this.samples.length === 0) return this.initialBytesPerMs;
    return this.samples.length / this.samples.reduce((s, bw) => s + 1 / bw, 0);
  }
}

export interface SchedulerOptions {
  readonly concurrency?: number;
  /** Fixed transfer time given to directory / metadata ops (ms). Default 1. */
  readonly directoryOpMs?: number;
  readonly bandwidth?: BandwidthEstimator;
  readonly now?: () => number;
  /** Observer for tests and metrics: called when an op starts. */
  readonly onStart?: (info: { namespace: string; paths: readonly string[]; fop: number }) => void;
}

function related(a: Pending, b: { namespace: string; paths: readonly string[] }): boolean {
  if (a.namespace !== b.namespace) return false;
  for (const p of a.paths) for (const q of b.paths) if (isWithin(p, q) || isWithin(q, p)) return true;
  return false;
}

export class OpScheduler {
  private readonly queue: Pending[] = [];
  private running = 0;
  private order = 0;
  readonly bandwidth: BandwidthEstimator;
  private readonly concurrency: number;
  private readonly directoryOpMs: number;
  private readonly now: () => number;

  constructor(private readonly options: SchedulerOptions = {}) {
    this.concurrency = Math.max(1, options.concurrency ?? 8);
    this.directoryOpMs = options.directoryOpMs ?? 1;
    this.bandwidth = options.bandwidth ?? new BandwidthEstimator();
    this.now = options.now ?? (() => performance.now());
  }

  /** Operations waiting or running. */
  get depth(): number {
    return this.queue.length;
  }

  estimateMs(bytes: number): number {
    return bytes <= 0 ? this.directoryOpMs : this.directoryOpMs + bytes / this.bandwidth.bytesPerMs();
  }

  submit<T>(op: ScheduledOp<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const arrival = this.now();
      const entry: Pending = {
        namespace: op.namespace,
        paths: op.paths,
        arrival,
        order: this.order++,
        fop: arrival + this.estimateMs(op.bytes),
        running: false,
        start: () => {
          this.options.onStart?.({ namespace: op.namespace, paths: op.paths, fop: entry.fop });
          op.run()
            .then(resolve, reject)
            .finally(() => {
              this.queue.splice(this.queue.indexOf(entry), 1);
              this.running -= 1;
              this.pump();
            });
        },
      };
      this.queue.push(entry);
      this.pump();
    });
  }

  private pump(): void {
    while (this.running < this.concurrency) {
      let best: Pending | undefined;
      for (let i = 0; i < this.queue.length; i++) {
        const c = this.queue[i];
        if (!c || c.running) continue;
        // Stop-and-wait: anything related that arrived earlier (running or not) blocks c.
        let blocked = false;
        for (let j = 0; j < i; j++) {
          const earlier = this.queue[j];
          if (earlier && related(earlier, c)) {
            blocked = true;
            break;
          }
        }
        if (blocked) continue;
        if (!best || c.fop < best.fop || (c.fop === best.fop && c.order < best.order)) best = c;
      }
      if (!best) return;
      best.running = true;
      this.running += 1;
      best.start();
    }
  }
}
