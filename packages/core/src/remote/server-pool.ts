/**
 * Which proxy instance the agent talks to (issue #18, "clients fail over"). Several proxy
 * instances can serve one Weft storage (one PostgreSQL, one object tier, one shared
 * filesystem tier); the agent learns their list from `GET /v1/cluster/instances`, measures
 * each one's round trip, and talks to the nearest that answers.
 *
 * The rules, all here so that one unit test walks them (the client, proxy-client.ts, only
 * reports what happened and asks where to send the next request):
 * - An instance that cannot be reached (refused, reset, timed out) is down at once; one that
 *   answers 502/503/504 (not SLOW_DOWN) is down after `unavailableToDown` answers in a row.
 *   A down instance is not tried again before its backoff (Weft's one `Backoff`) has
 *   passed; each further failure doubles the wait up to the cap, an answer resets it.
 * - When the current instance goes down the agent moves at once to the best one that is up:
 *   active before draining, then lowest measured round trip (unknown last) — round trips
 *   within the same 25 % band (all under 5 ms alike) count as equal, and among those the
 *   one with the most available bandwidth (the server's BW_a) wins — then the enrolment
 *   server, then the order listed.
 * - All down: requests go to the instance whose backoff ends first (and fail fast while it
 *   is away); the engine's own retry timer keeps the pace.
 * - Never from https to plain http: an instance listed at an http URL is ignored by an agent
 *   that enrolled over https (its token would cross the network in the clear). Nor to this
 *   machine (loopback or unspecified address) unless it enrolled there: a proxy listening on
 *   0.0.0.0 lists itself at 127.0.0.1, which elsewhere is the agent's own machine.
 * - Moving back to a nearer instance has hysteresis: it must have answered
 *   `returnAfterAnswers` probes in a row since it was last down, be at most `returnRttRatio`
 *   of the current one's round trip (or the current one is draining), and the agent must
 *   have stayed `minDwellMs` where it is — so two instances of similar distance, or one
 *   that flaps, do not make the agent bounce.
 */
import { Backoff, type BackoffPolicy } from '@weft/providers/backoff';

/** An instance as the server lists it (the cluster contract's fields the agent uses). */
export interface ServerInstance {
  readonly url: string;
  readonly id?: string;
  readonly state?: 'active' | 'draining';
  /** What it can still move, bytes/s (BW_a of the cluster list). */
  readonly availableBps?: number;
}

export type ServerFailure = 'unreachable' | 'unavailable';

export interface ServerPoolOptions {
  /** The server this device enrolled with: always kept, first among equals. */
  readonly home: string;
  readonly now?: () => number;
  /** For the backoff's jitter (tests pass a fixed one). */
  readonly random?: () => number;
  /** How long a down instance is left alone; doubled per failure. Default 1 s … 30 s. */
  readonly downBackoff?: BackoffPolicy;
  /** 502/503/504 answers in a row before an instance counts as down. Default 2. */
  readonly unavailableToDown?: number;
  /** Answers in a row a nearer instance needs before the agent moves back. Default 3. */
  readonly returnAfterAnswers?: number;
  /** Least time on an instance before moving back to a nearer one. Default 30 s. */
  readonly minDwellMs?: number;
  /** A nearer instance is worth a move when its round trip is at most this share. Default 0.75. */
  readonly returnRttRatio?: number;
}

/** What a persisted pool holds (the agent's `servers.json`). */
export interface ServerPoolSnapshot {
  readonly home: string;
  readonly current: string;
  readonly instances: readonly { url: string; id?: string; state?: 'active' | 'draining'; rttMs?: number }[];
}

/** One instance as the status shows it. */
export interface ServerView {
  readonly url: string;
  readonly id?: string;
  readonly state: 'active' | 'draining';
  readonly rttMs?: number;
  readonly up: boolean;
}

interface Member {
  readonly url: string;
  id?: string;
  state: 'active' | 'draining';
  /** Smoothed round trip (EWMA), ms. */
  rttMs?: number;
  availableBps?: number;
  answers: number;
  unavailable: number;
  downUntilMs?: number;
  readonly backoff: Backoff;
}

const DEFAULT_DOWN_BACKOFF: BackoffPolicy = { baseMs: 1_000, capMs: 30_000, jitter: 'equal' };
/** Weight of a new round-trip sample. */
const RTT_ALPHA = 0.3;
/** Round trips are compared in bands of this ratio, from this floor (below it: one band). */
const RTT_BAND_RATIO = 1.25;
const RTT_BAND_FLOOR_MS = 5;

/** Which band of round trips `ms` falls in: 0 up to the floor, then one per 25 %. */
function rttBand(ms: number): number {
  return Math.floor(Math.log(Math.max(ms, RTT_BAND_FLOOR_MS) / RTT_BAND_FLOOR_MS) / Math.log(RTT_BAND_RATIO));
}

export const normalServerUrl = (url: string): string => url.trim().replace(/\/+$/, '');

export class ServerPool {
  private readonly members = new Map<string, Member>();
  private currentUrl: string;
  private lastMoveMs: number;
  private readonly now: () => number;
  /** Times the agent moved because its instance went down. */
  failovers = 0;
  /** Times it moved back to a nearer instance. */
  returns = 0;
  private readonly listeners = new Set<() => void>();
  private readonly downListeners = new Set<(url: string) => void>();

  constructor(private readonly options: ServerPoolOptions) {
    this.now = options.now ?? Date.now;
    const home = normalServerUrl(options.home);
    this.currentUrl = home;
    this.lastMoveMs = this.now();
    this.add({ url: home });
  }

  /** A pool as saved, checked; a snapshot for another enrolment is ignored. */
  static restore(snapshot: unknown, options: ServerPoolOptions): ServerPool {
    const pool = new ServerPool(options);
    const s = snapshot as Partial<ServerPoolSnapshot> | undefined;
    if (!s || typeof s !== 'object' || typeof s.home !== 'string' || !Array.isArray(s.instances)) return pool;
    if (normalServerUrl(s.home) !== pool.home) return pool;
    for (const i of s.instances) {
      if (!i || typeof i.url !== 'string' || !pool.acceptable(i.url)) continue;
      const m = pool.add(i);
      if (typeof i.rttMs === 'number' && Number.isFinite(i.rttMs) && i.rttMs >= 0) m.rttMs = i.rttMs;
    }
    if (typeof s.current === 'string' && pool.members.has(normalServerUrl(s.current)))
      pool.currentUrl = normalServerUrl(s.current);
    return pool;
  }

  get home(): string {
    return normalServerUrl(this.options.home);
  }

  /** The instance requests go to now (it may be down when all are). */
  get current(): string {
    return this.currentUrl;
  }

  /** Called after the current instance changed. */
  onMove(listener: () => void): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  /**
   * Called when an instance is found down: requests still waiting on it (a hung instance
   * never answers them) are abandoned and sent to the next (proxy-client.ts).
   */
  onDown(listener: (url: string) => void): { dispose(): void } {
    this.downListeners.add(listener);
    return { dispose: () => this.downListeners.delete(listener) };
  }

  snapshot(): ServerPoolSnapshot {
    return {
      home: this.home,
      current: this.currentUrl,
      instances: [...this.members.values()].map((m) => ({
        url: m.url,
        ...(m.id !== undefined ? { id: m.id } : {}),
        state: m.state,
        ...(m.rttMs !== undefined ? { rttMs: Math.round(m.rttMs * 10) / 10 } : {}),
      })),
    };
  }

  view(): ServerView[] {
    return [...this.members.values()].map((m) => ({
      url: m.url,
      ...(m.id !== undefined ? { id: m.id } : {}),
      state: m.state,
      ...(m.rttMs !== undefined ? { rttMs: m.rttMs } : {}),
      up: this.isUp(m),
    }));
  }

  /**
   * Where to send a transfer's blocks when a server steers it to `named` (its `preferred`
   * instance, HyCloud Eq. 7–8): that instance only when this pool already lists it and finds
   * it up, and it is not the current one; else undefined. The device token never goes to a
   * URL that an answer alone named.
   */
  steerable(named: string | undefined): string | undefined {
    if (named === undefined || !this.acceptable(named)) return undefined;
    const m = this.members.get(normalServerUrl(named));
    return m && m.url !== this.currentUrl && this.isUp(m) ? m.url : undefined;
  }

  /** The id of the current instance, when the server named it. */
  currentId(): string | undefined {
    return this.members.get(this.currentUrl)?.id;
  }

  /**
   * The server's list: new instances are added, known ones take its id and state; one it no
   * longer lists is dropped (the enrolment server and the current one stay, the current one
   * as draining so that the agent moves off it when another answers).
   */
  learn(list: readonly ServerInstance[]): void {
    const listed = new Set<string>();
    for (const i of list) {
      if (!this.acceptable(i.url)) continue;
      const m = this.add(i);
      listed.add(m.url);
    }
    if (listed.size === 0) return;
    for (const m of [...this.members.values()]) {
      if (listed.has(m.url)) continue;
      if (m.url === this.currentUrl) m.state = 'draining';
      else if (m.url !== this.home) this.members.delete(m.url);
    }
  }

  /** The instance answered (a request or a probe); `rttMs` when it was a timed probe. */
  answered(url: string, rttMs?: number): void {
    const m = this.members.get(normalServerUrl(url));
    if (!m) return;
    m.answers += 1;
    m.unavailable = 0;
    m.downUntilMs = undefined;
    m.backoff.reset();
    if (rttMs !== undefined && Number.isFinite(rttMs) && rttMs >= 0)
      m.rttMs = m.rttMs === undefined ? rttMs : m.rttMs + RTT_ALPHA * (rttMs - m.rttMs);
  }

  /**
   * The instance failed. Returns where the next request goes and whether that is another
   * instance than the one that failed (then the request may be sent again there at once).
   */
  failed(url: string, kind: ServerFailure): { readonly current: string; readonly moved: boolean } {
    const m = this.members.get(normalServerUrl(url));
    if (!m) return { current: this.currentUrl, moved: false };
    m.answers = 0;
    if (kind === 'unavailable') m.unavailable += 1;
    const wentDown = kind === 'unreachable' || m.unavailable >= (this.options.unavailableToDown ?? 2);
    if (wentDown) {
      m.unavailable = 0;
      m.downUntilMs = this.now() + m.backoff.next();
    }
    let result: { current: string; moved: boolean };
    if (m.url !== this.currentUrl) {
      // Another request had already moved on: send this one there too, if that one is up.
      const cur = this.members.get(this.currentUrl);
      result = { current: this.currentUrl, moved: !!cur && this.isUp(cur) };
    } else {
      const before = this.currentUrl;
      this.settle();
      const now = this.members.get(this.currentUrl);
      result = { current: this.currentUrl, moved: this.currentUrl !== before && !!now && this.isUp(now) };
    }
    // Told once the pool has moved, so that what is abandoned goes to the new instance.
    if (wentDown) for (const l of [...this.downListeners]) l(m.url);
    return result;
  }

  /** Whether a down instance's wait is over (the probe loop asks before probing it). */
  due(url: string): boolean {
    const m = this.members.get(normalServerUrl(url));
    return !!m && (m.downUntilMs === undefined || m.downUntilMs <= this.now());
  }

  /** Milliseconds until some instance may be tried again (0: one is up now). */
  retryInMs(): number {
    let soonest = Infinity;
    for (const m of this.members.values()) {
      if (this.isUp(m)) return 0;
      soonest = Math.min(soonest, (m.downUntilMs ?? 0) - this.now());
    }
    return Math.max(0, soonest);
  }

  /**
   * Look again after probes: leave a down or draining instance for the best one up, or move
   * back to a nearer one under the hysteresis rules. True when the current instance changed.
   */
  reconsider(): boolean {
    const before = this.currentUrl;
    const cur = this.members.get(this.currentUrl);
    if (!cur || !this.isUp(cur)) {
      this.settle();
      return this.currentUrl !== before;
    }
    const best = this.ranked()[0];
    if (!best || best.url === cur.url || !this.isUp(best)) return false;
    if (best.answers < (this.options.returnAfterAnswers ?? 3)) return false;
    if (cur.state !== 'draining') {
      if (this.now() - this.lastMoveMs < (this.options.minDwellMs ?? 30_000)) return false;
      if (best.rttMs === undefined) return false;
      if (cur.rttMs !== undefined && best.rttMs > cur.rttMs * (this.options.returnRttRatio ?? 0.75))
        return false;
    }
    this.moveTo(best, 'return');
    return true;
  }

  /** The current instance is down or gone: the best one up, else the first due. */
  private settle(): void {
    const cur = this.members.get(this.currentUrl);
    if (cur && this.isUp(cur) && cur.state === 'active') return;
    const best = this.ranked()[0];
    if (best && this.isUp(best)) {
      if (best.url !== this.currentUrl) this.moveTo(best, 'failover');
      return;
    }
    if (cur && this.isUp(cur)) return; // draining, but nothing else answers
    // All down: the one whose wait ends first.
    const first = [...this.members.values()].sort((a, b) => (a.downUntilMs ?? 0) - (b.downUntilMs ?? 0))[0];
    if (first && first.url !== this.currentUrl) {
      this.currentUrl = first.url;
      this.fire();
    }
  }

  private moveTo(m: Member, why: 'failover' | 'return'): void {
    this.currentUrl = m.url;
    this.lastMoveMs = this.now();
    if (why === 'failover') this.failovers += 1;
    else this.returns += 1;
    this.fire();
  }

  private fire(): void {
    for (const l of [...this.listeners]) l();
  }

  private isUp(m: Member): boolean {
    return m.downUntilMs === undefined || m.downUntilMs <= this.now();
  }

  /**
   * Up first, active before draining, nearest first (by band), the most available bandwidth,
   * the enrolment server, listing order.
   */
  private ranked(): Member[] {
    const order = [...this.members.values()];
    const index = new Map(order.map((m, i) => [m, i]));
    const key = (m: Member): number[] => [
      this.isUp(m) ? 0 : 1,
      m.state === 'active' ? 0 : 1,
      m.rttMs === undefined ? 1 : 0,
      m.rttMs === undefined ? 0 : rttBand(m.rttMs),
      -(m.availableBps ?? 0),
      m.url === this.home ? -1 : (index.get(m) ?? 0),
    ];
    return order.sort((a, b) => {
      const ka = key(a);
      const kb = key(b);
      for (let i = 0; i < ka.length; i++) if (ka[i] !== kb[i]) return ka[i]! - kb[i]!;
      return 0;
    });
  }

  /**
   * Whether the agent may talk to a listed instance at `url`: http(s) only, and never plain
   * http when it enrolled over https — an instance behind a TLS-terminating load balancer
   * with no `publicUrl` lists its own listen URL (`http://10.0.0.5:8080`), and an agent that
   * could reach it moved there and sent its device token in the clear.
   */
  private acceptable(url: string): boolean {
    if (!/^https?:\/\//i.test(url)) return false;
    if (/^https:/i.test(this.home) && /^http:/i.test(url)) return false;
    // A proxy listening on 0.0.0.0 with no publicUrl lists http://127.0.0.1:PORT: on another
    // machine that is the agent's own, where whatever listens on that port got the token.
    return !onThisMachine(url) || onThisMachine(this.home);
  }

  private add(i: ServerInstance): Member {
    const url = normalServerUrl(i.url);
    let m = this.members.get(url);
    if (!m) {
      m = {
        url,
        state: 'active',
        answers: 0,
        unavailable: 0,
        backoff: new Backoff(this.options.downBackoff ?? DEFAULT_DOWN_BACKOFF, this.options.random),
      };
      this.members.set(url, m);
    }
    if (i.id !== undefined) m.id = i.id;
    if (i.state === 'active' || i.state === 'draining') m.state = i.state;
    if (typeof i.availableBps === 'number' && Number.isFinite(i.availableBps) && i.availableBps >= 0)
      m.availableBps = i.availableBps;
    return m;
  }
}

/** The status's `server` line (ui-contract FolderStatusSchema.server). */
export function serverStatus(pool: ServerPool): {
  url: string;
  id?: string;
  rttMs?: number;
  instances: number;
  up: number;
  failovers: number;
} {
  const all = pool.view();
  const cur = all.find((v) => v.url === pool.current);
  return {
    url: pool.current,
    ...(cur?.id !== undefined ? { id: cur.id } : {}),
    ...(cur?.rttMs !== undefined ? { rttMs: Math.round(cur.rttMs * 10) / 10 } : {}),
    instances: all.length,
    up: all.filter((v) => v.up).length,
    failovers: pool.failovers,
  };
}

/** Whether a URL names this machine: localhost, 127.0.0.0/8, ::1, or an unspecified address. */
function onThisMachine(url: string): boolean {
  let host: string;
  try {
    host = new URL(url).hostname.toLowerCase();
  } catch {
    return false;
  }
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  return (
    host === 'localhost' ||
    host.endsWith('.localhost') ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host) ||
    host === '0.0.0.0' ||
    host === '::1' ||
    host === '::' ||
    /^::ffff:(7f[0-9a-f]{2}:|0:0$)/.test(host) // IPv4-mapped 127.x and 0.0.0.0, as URL writes them
  );
}
