/**
 * Ordered apply (HyCloud §III-C). Operations on the same path or on related paths (one
 * inside the other; both ends of a move) run strictly in arrival order, one at a time
 * (stop-and-wait). Unrelated operations run in parallel, up to `concurrency` at once, and
 * when more are ready than can run, the one with the smallest
 *   FOP(x) = arrival(x) + estimatedTransferTime(x)                         (Eq. 6)
 * goes first. Transfer time = bytes / bandwidth, the bandwidth being the harmonic mean of
 * the last 5 measured transfers (Eq. 4); directory operations get a small fixed time.
 * Arrival is epoch ms, so FOPs compare across instances: with several instances on one
 * PostgreSQL, `around` (cluster/ordering.ts + cluster/admission.ts) is given each op's FOP
 * and grants the cluster's shared apply slots in FOP order over every instance's queue.
 */

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
  readonly fop: number;
  readonly order: number;
  /** Earlier related operations not yet finished. */
  waitingFor: number;
  readonly dependents: Pending[];
  readonly start: () => void;
}

/** Min-heap of ready operations by (FOP, arrival order). */
class ReadyHeap {
  private readonly items: Pending[] = [];

  get size(): number {
    return this.items.length;
  }

  private less(a: Pending, b: Pending): boolean {
    return a.fop < b.fop || (a.fop === b.fop && a.order < b.order);
  }

  push(x: Pending): void {
    const h = this.items;
    h.push(x);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  pop(): Pending | undefined {
    const h = this.items;
    const top = h[0];
    const last = h.pop();
    if (h.length > 0 && last) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && this.less(h[l]!, h[m]!)) m = l;
        if (r < h.length && this.less(h[r]!, h[m]!)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m]!, h[i]!];
        i = m;
      }
    }
    return top;
  }
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
  /** The arrival clock, epoch ms (default Date.now). */
  readonly now?: () => number;
  /** Observer for tests and metrics: called when an op starts. */
  readonly onStart?: (info: { namespace: string; paths: readonly string[]; fop: number }) => void;
  /**
   * Wraps each op's run once its turn has come here (cluster/ordering.ts: the locks that
   * order related operations across instances sharing one PostgreSQL). The op counts as
   * started (onDone's startedMs) when `around` calls `run`.
   */
  readonly around?: <T>(
    namespace: string,
    paths: readonly string[],
    run: () => Promise<T>,
    fop: number,
  ) => Promise<T>;
  /**
   * Observer called when an op has finished (the op log of the cluster tests, op-log.ts):
   * when it arrived, started and ended (epoch ms, this machine's clock) and what it returned.
   */
  readonly onDone?: (info: {
    namespace: string;
    paths: readonly string[];
    arrivedMs: number;
    startedMs: number;
    endedMs: number;
    result: unknown;
  }) => void;
}

export class OpScheduler {
  private readonly ready = new ReadyHeap();
  /** Pending or running ops by the exact path they touch. */
  private readonly exact = new Map<string, Set<Pending>>();
  /** Pending or running ops by every folder they lie in (and their own path). */
  private readonly below = new Map<string, Set<Pending>>();
  private pending = 0;
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
    this.now = options.now ?? Date.now;
  }

  /** Operations waiting or running. */
  get depth(): number {
    return this.pending;
  }

  estimateMs(bytes: number): number {
    return bytes <= 0 ? this.directoryOpMs : this.directoryOpMs + bytes / this.bandwidth.bytesPerMs();
  }

  private static key(ns: string, path: string): string {
    return `${ns}\0${path}`;
  }

  private index(map: Map<string, Set<Pending>>, key: string, p: Pending, add: boolean): void {
    let set = map.get(key);
    if (add) {
      if (!set) map.set(key, (set = new Set()));
      set.add(p);
    } else if (set) {
      set.delete(p);
      if (set.size === 0) map.delete(key);
    }
  }

  /** Keys an op is indexed under: its paths in `exact`, those and every ancestor in `below`. */
  private register(p: Pending, add: boolean): void {
    for (const path of p.paths) this.index(this.exact, OpScheduler.key(p.namespace, path), p, add);
    for (const dir of withAncestors(p.paths))
      this.index(this.below, OpScheduler.key(p.namespace, dir), p, add);
  }

  /** Earlier ops related to these paths: at an ancestor, at the path, or inside it. */
  private relatedEarlier(namespace: string, paths: readonly string[]): Set<Pending> {
    const out = new Set<Pending>();
    for (const dir of distinctAncestors(paths))
      for (const q of this.exact.get(OpScheduler.key(namespace, dir)) ?? []) out.add(q);
    for (const path of paths)
      for (const q of this.below.get(OpScheduler.key(namespace, path)) ?? []) out.add(q);
    return out;
  }

  submit<T>(op: ScheduledOp<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const arrival = this.now();
      const arrivedMs = this.options.onDone ? Date.now() : 0;
      const node: Pending = {
        namespace: op.namespace,
        paths: op.paths,
        order: this.order++,
        fop: arrival + this.estimateMs(op.bytes),
        waitingFor: 0,
        dependents: [],
        start: () => {
          this.options.onStart?.({ namespace: op.namespace, paths: op.paths, fop: node.fop });
          let startedMs = 0;
          let endedMs = 0;
          // Start and end as the op itself ran: inside `around`, while its locks are held.
          const run = async (): Promise<T> => {
            if (this.options.onDone) startedMs = Date.now();
            try {
              return await op.run();
            } finally {
              if (this.options.onDone) endedMs = Date.now();
            }
          };
          const around = this.options.around;
          let result: Promise<T>;
          try {
            result = around ? around(op.namespace, op.paths, run, node.fop) : run();
          } catch (e) {
            result = Promise.reject(e);
          }
          const done = this.options.onDone;
          if (done) {
            // An observer that throws must not change the op's outcome.
            const report = (r: unknown): void => {
              if (startedMs === 0) return; // refused before it ran (cluster ordering): nothing applied
              try {
                done({
                  namespace: op.namespace,
                  paths: op.paths,
                  arrivedMs,
                  startedMs,
                  endedMs,
                  result: r,
                });
              } catch {
                /* observer only */
              }
            };
            result = result.then(
              (r) => (report(r), r),
              (e: unknown) => {
                report(e);
                throw e;
              },
            );
          }
          result.then(resolve, reject).finally(() => this.finish(node));
        },
      };
      // Stop-and-wait: every related op that arrived earlier must finish first.
      for (const earlier of this.relatedEarlier(op.namespace, op.paths)) {
        earlier.dependents.push(node);
        node.waitingFor += 1;
      }
      this.register(node, true);
      this.pending += 1;
      if (node.waitingFor === 0) this.ready.push(node);
      this.pump();
    });
  }

  private finish(node: Pending): void {
    this.register(node, false);
    this.pending -= 1;
    this.running -= 1;
    for (const d of node.dependents) {
      d.waitingFor -= 1;
      if (d.waitingFor === 0) this.ready.push(d);
    }
    this.pump();
  }

  private pump(): void {
    while (this.running < this.concurrency) {
      const next = this.ready.pop();
      if (!next) return;
      this.running += 1;
      next.start();
    }
  }
}

/**
 * The ancestors of `paths`, each once (a bundle's 1,000 files share a few folders: issue #16,
 * each file's whole chain was indexed and looked up again, ~8 map operations per file).
 */
function distinctAncestors(paths: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const path of paths) {
    // From the deepest up: a folder already there has its own ancestors there too.
    for (let i = path.lastIndexOf('/'); i > 0; i = path.lastIndexOf('/', i - 1)) {
      const dir = path.slice(0, i);
      if (out.has(dir)) break;
      out.add(dir);
    }
  }
  return out;
}

/** `paths` and their ancestors, each once. */
function withAncestors(paths: readonly string[]): Set<string> {
  const out = distinctAncestors(paths);
  for (const path of paths) out.add(path);
  return out;
}
