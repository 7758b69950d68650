/**
 * Which proxies serve which cloud (CoCloud §III-B). Each proxy periodically times a small
 * probe file up to and back from each cloud it can reach; the bandwidth estimate of a
 * (proxy, cloud) link is the harmonic mean of its last k probes (DESIGN §10). A cloud is
 * served by every proxy whose time for the probe is within +10 % of the fastest proxy's —
 * equivalently, whose bandwidth is at least best / 1.1. Stale figures (a proxy that
 * stopped reporting) are ignored.
 */
import { randomBytes } from 'node:crypto';
import { collect, type Provider } from '@weft/providers';
import { systemClock } from '../clock.ts';

export interface Measurement {
  readonly proxy: string;
  readonly cloud: string;
  /** Bytes per second. */
  readonly bytesPerSecond: number;
  /** When it was measured (ms, the selector's clock). */
  readonly at: number;
}

export interface ProxySelectorOptions {
  /** +10 % by default (CoCloud: "latency less than +10 % the lowest value"). */
  readonly tolerance?: number;
  /** Figures older than this are ignored (default 30 min = three probe periods). */
  readonly maxAgeMs?: number;
  /** Probes averaged per link (harmonic mean; default 5). */
  readonly samples?: number;
  readonly now?: () => number;
}

export class ProxySelector {
  private readonly links = new Map<string, { rates: number[]; at: number; proxy: string; cloud: string }>();
  private readonly tolerance: number;
  private readonly maxAgeMs: number;
  private readonly samples: number;
  private readonly now: () => number;

  constructor(options: ProxySelectorOptions = {}) {
    this.tolerance = options.tolerance ?? 0.1;
    this.maxAgeMs = options.maxAgeMs ?? 30 * 60 * 1000;
    this.samples = options.samples ?? 5;
    this.now = options.now ?? systemClock;
  }

  /** Fold one probe result in. */
  record(proxy: string, cloud: string, bytesPerSecond: number): void {
    if (!(bytesPerSecond > 0) || !Number.isFinite(bytesPerSecond)) return;
    const key = `${proxy}\u0000${cloud}`;
    const l = this.links.get(key) ?? { rates: [], at: 0, proxy, cloud };
    l.rates.push(bytesPerSecond);
    if (l.rates.length > this.samples) l.rates.shift();
    l.at = this.now();
    this.links.set(key, l);
  }

  /**
   * Take a peer's estimate of its own link (already averaged there; `ageMs` old): it
   * replaces what we held for that link.
   */
  adopt(proxy: string, cloud: string, bytesPerSecond: number, ageMs: number): void {
    if (!(bytesPerSecond > 0) || !Number.isFinite(bytesPerSecond)) return;
    this.links.set(`${proxy}\u0000${cloud}`, {
      rates: [bytesPerSecond],
      at: this.now() - Math.max(0, ageMs),
      proxy,
      cloud,
    });
  }

  /** This proxy's own links as a peer should see them (`bandwidth` message). */
  own(proxy: string): { proxy: string; cloud: string; bytesPerSecond: number; ageMs: number }[] {
    const now = this.now();
    return this.measurements()
      .filter((m) => m.proxy === proxy)
      .map((m) => ({
        proxy,
        cloud: m.cloud,
        bytesPerSecond: m.bytesPerSecond,
        ageMs: Math.max(0, Math.round(now - m.at)),
      }));
  }

  /** The current estimate of each fresh link. */
  measurements(): Measurement[] {
    const now = this.now();
    const out: Measurement[] = [];
    for (const l of this.links.values()) {
      if (now - l.at > this.maxAgeMs || l.rates.length === 0) continue;
      const harmonic = l.rates.length / l.rates.reduce((s, r) => s + 1 / r, 0);
      out.push({ proxy: l.proxy, cloud: l.cloud, bytesPerSecond: harmonic, at: l.at });
    }
    return out;
  }

  /** Proxies that serve `cloud`, fastest first. */
  servers(cloud: string): string[] {
    const ms = this.measurements().filter((m) => m.cloud === cloud);
    const best = Math.max(0, ...ms.map((m) => m.bytesPerSecond));
    if (best <= 0) return [];
    return ms
      .filter((m) => m.bytesPerSecond * (1 + this.tolerance) >= best)
      .sort((a, b) => b.bytesPerSecond - a.bytesPerSecond || (a.proxy < b.proxy ? -1 : 1))
      .map((m) => m.proxy);
  }

  /** One serving proxy for a transfer to or from `cloud`: the least loaded, then the fastest. */
  pick(cloud: string, load: (proxy: string) => number = () => 0): string | undefined {
    const list = this.servers(cloud);
    let best: string | undefined;
    for (const p of list) if (best === undefined || load(p) < load(best)) best = p;
    return best;
  }
}

export interface BandwidthProbeOptions {
  /** This proxy's id. */
  readonly proxy: string;
  /** The clouds this proxy can reach, by name. */
  readonly clouds: ReadonlyMap<string, Provider>;
  readonly selector: ProxySelector;
  /** Test file size S_TF (default 256 KiB). */
  readonly bytes?: number;
  /** Default 10 minutes. */
  readonly intervalMs?: number;
  /** Folder for the probe file in each cloud (default '.weft-probe'). */
  readonly folder?: string;
  /** Clock used to time the probe (ms). */
  readonly clock?: () => number;
  /** A probe failed (the link keeps its older figures, which age out). */
  readonly onError?: (cloud: string, err: unknown) => void;
}

/** The periodic, timed probe of each cloud from this proxy (the "Measurement Agent"). */
export class BandwidthProbe {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private readonly bytes: number;
  private readonly clock: () => number;

  constructor(private readonly options: BandwidthProbeOptions) {
    this.bytes = options.bytes ?? 256 * 1024;
    this.clock = options.clock ?? (() => performance.now());
  }

  /** Probe every cloud once: upload S_TF, download it, bandwidth = 2·S_TF / (T_up + T_down). */
  async measureOnce(): Promise<void> {
    const folder = this.options.folder ?? '.weft-probe';
    for (const [cloud, p] of this.options.clouds) {
      const path = `${folder}/${this.options.proxy}-${randomBytes(4).toString('hex')}.bin`;
      try {
        await p.mkdir(folder).catch(() => undefined);
        const data = randomBytes(this.bytes);
        const t0 = this.clock();
        await p.write(path, data);
        const back = await collect(await p.read(path));
        const t2 = this.clock();
        if (back.byteLength !== data.byteLength) throw new Error('probe read back a different size');
        const seconds = (t2 - t0) / 1000;
        if (seconds > 0) this.options.selector.record(this.options.proxy, cloud, (2 * this.bytes) / seconds);
      } catch (err) {
        this.options.onError?.(cloud, err);
      } finally {
        await p.remove(path).catch(() => undefined);
      }
    }
  }

  /** Measure now and then every interval; returns a disposer. */
  start(): () => Promise<void> {
    const tick = (): void => {
      this.running ??= this.measureOnce().finally(() => (this.running = undefined));
    };
    tick();
    this.timer = setInterval(tick, this.options.intervalMs ?? 10 * 60 * 1000);
    this.timer.unref();
    return () => this.stop();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }
}
