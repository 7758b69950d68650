/**
 * What an operator (and, restricted to their own files, a user) sees of the redundant tier
 * (issue #17): each backend's class, measured speed, price and state, and **what is at risk
 * if one more backend fails** — for every backend that is up, how many objects would become
 * unreadable and how many would be left with no spare holder if it failed too.
 *
 * `assessRisk` is a pure function over the holdings (property-tested on its own);
 * `tierStatus` reads them from the placement store in one pass, a page of objects at a time.
 */
import { type BackendClass, classify, harmonicMean } from './planner.ts';
import type { RedundantProvider } from './redundant-provider.ts';

/** One object: how many good holders it needs to be readable (1 replica, k fragments) and where they are. */
export interface ObjectHolding {
  readonly need: number;
  /** Every replica / fragment location: its backend and whether it is stored and good (`ok`). */
  readonly holders: readonly { readonly backend: string; readonly ok: boolean }[];
  /** What this object counts for (e.g. the files that refer to it). Default 1. */
  readonly weight?: number;
}

export interface RiskCounts {
  /** Objects (weighted) looked at. */
  objects: number;
  /** Every holder good and on a backend that is up. */
  whole: number;
  /** Readable, with at least one spare, but not whole (a holder down, owed or bad). */
  reduced: number;
  /** Readable with no spare: one more lost holder makes it unreadable. */
  atMinimum: number;
  /** Fewer good holders up than needed: unreadable until a backend returns. */
  unreadable: number;
}

export interface RiskIfFails {
  /** Readable now, unreadable if this backend failed too. */
  unreadable: number;
  /** Readable with no spare if this backend failed too (already so, or pushed there). */
  atMinimum: number;
}

export interface RiskReport extends RiskCounts {
  /** For each backend that is up now: what one more failure, of that backend, would do. */
  ifFails: Record<string, RiskIfFails>;
}

/**
 * Count objects by how many good holders they have on backends that are `up`, and what the
 * failure of each up backend in `backends` would do to them.
 */
export function assessRisk(
  objects: Iterable<ObjectHolding>,
  up: ReadonlySet<string>,
  backends: readonly string[],
): RiskReport {
  const report: RiskReport = { objects: 0, whole: 0, reduced: 0, atMinimum: 0, unreadable: 0, ifFails: {} };
  const candidates = backends.filter((b) => up.has(b));
  for (const b of candidates) report.ifFails[b] = { unreadable: 0, atMinimum: 0 };
  for (const o of objects) {
    const w = o.weight ?? 1;
    const good = new Map<string, number>();
    let avail = 0;
    for (const h of o.holders) {
      if (!h.ok || !up.has(h.backend)) continue;
      avail += 1;
      good.set(h.backend, (good.get(h.backend) ?? 0) + 1);
    }
    report.objects += w;
    if (avail < o.need) report.unreadable += w;
    else if (avail === o.need) report.atMinimum += w;
    else if (avail === o.holders.length) report.whole += w;
    else report.reduced += w;
    if (avail < o.need) continue;
    for (const b of candidates) {
      const after = avail - (good.get(b) ?? 0);
      const r = report.ifFails[b]!;
      if (after < o.need) r.unreadable += w;
      else if (after === o.need) r.atMinimum += w;
    }
  }
  return report;
}

/** Objects read per page by the status pass. */
const STATUS_PAGE = 1000;

/** Add the counts of `part` (the same backends) into `into`. */
function addRisk(into: RiskReport, part: RiskReport): void {
  for (const k of ['objects', 'whole', 'reduced', 'atMinimum', 'unreadable'] as const) into[k] += part[k];
  for (const [b, r] of Object.entries(part.ifFails)) {
    const t = into.ifFails[b]!;
    t.unreadable += r.unreadable;
    t.atMinimum += r.atMinimum;
  }
}

export type BackendState = 'available' | 'degraded' | 'down';

export interface BackendStatus {
  readonly id: string;
  /** The backend Provider's name (e.g. `fs:/srv/weft-objects`, `s3:bucket`). */
  readonly name: string;
  /** Performance- or cost-oriented, from the measured speed (planner.ts `classify`). */
  readonly class: BackendClass;
  /**
   * `down`: not answering (since `since`); `degraded`: answering, but missing blobs it should
   * hold — outage-log entries still to replay (since the oldest) or blobs found bad by a read
   * or the scrub and not yet repaired; `available`: holds all it should.
   */
  readonly state: BackendState;
  readonly since?: number;
  /** Mean request latency (ms) of the recent samples; absent until measured. */
  readonly latencyMs?: number;
  /** Harmonic mean of the recent throughputs (bytes/s); absent until measured. */
  readonly throughputBps?: number;
  readonly pricePerGbMonth: number;
  /** Outage-log entries waiting for it. */
  readonly outageLog: number;
  /** Blobs (replicas and fragments) placed on it, and of those found bad. */
  readonly blobs: number;
  readonly bad: number;
}

export interface TierStatus {
  readonly backends: BackendStatus[];
  readonly risk: RiskReport;
  /** Outage-log entries in all. */
  readonly outageLog: number;
}

/**
 * The tier as it stands: every backend's class, figures and state, and the risk report over
 * every object (weighted by `weights`, object id → weight, when given: objects not in it are
 * left out — e.g. one user's files).
 */
export async function tierStatus(
  tier: RedundantProvider,
  weights?: ReadonlyMap<string, number>,
): Promise<TierStatus> {
  const ids = tier.backendIds();
  const stats = tier.stats(ids);
  const classes = classify(stats);
  const health = new Map((await tier.health()).map((h) => [h.id, h]));
  const counts = await tier.store.backendCounts();
  // With weights, only the weighted objects are read (a user's view: a few queries per file
  // of theirs); without, one pass over every location, grouped by object, a page at a time.
  async function weighted(w: ReadonlyMap<string, number>): Promise<ObjectHolding[]> {
    const out: ObjectHolding[] = [];
    for (const [id, weight] of w) {
      const o = weight > 0 ? await tier.store.object(id) : undefined;
      if (!o) continue;
      const holders = (await tier.store.locations(id)).map((l) => ({
        backend: l.backend,
        ok: l.state === 'ok',
      }));
      out.push({ need: o.layout === 'replicated' ? 1 : o.k, holders, weight });
    }
    return out;
  }
  const up = new Set(ids.filter((id) => tier.isUp(id)));
  let risk: RiskReport;
  if (weights) risk = assessRisk(await weighted(weights), up, ids);
  else {
    risk = assessRisk([], up, ids);
    let after = '';
    for (;;) {
      const rows = await tier.store.holdings(after, STATUS_PAGE);
      if (rows.length === 0) break;
      const page: ObjectHolding[] = [];
      let current: { id: string; need: number; holders: { backend: string; ok: boolean }[] } | undefined;
      for (const row of rows) {
        if (current?.id !== row.object_id) {
          if (current) page.push({ need: current.need, holders: current.holders });
          current = { id: row.object_id, need: row.layout === 'replicated' ? 1 : row.k, holders: [] };
        }
        current.holders.push({ backend: row.backend, ok: row.state === 'ok' });
      }
      if (current) page.push({ need: current.need, holders: current.holders });
      addRisk(risk, assessRisk(page, up, ids));
      after = rows.at(-1)!.object_id;
    }
  }
  const backends: BackendStatus[] = [];
  for (const s of stats) {
    const h = health.get(s.id);
    const owed = h?.owed ?? 0;
    const badHere = counts.get(s.id)?.bad ?? 0;
    const measuredBps = tier.measured(s.id).throughputBps;
    const oldest = owed > 0 ? (await tier.store.logPending(s.id, 1))[0]?.at_ms : undefined;
    const state: BackendState =
      h?.state === 'down' ? 'down' : owed > 0 || badHere > 0 ? 'degraded' : 'available';
    const since = state === 'down' ? h?.downSince : state === 'degraded' ? oldest : undefined;
    backends.push({
      id: s.id,
      name: h?.name ?? s.id,
      class: classes.get(s.id) ?? 'cost',
      state,
      ...(since === undefined ? {} : { since }),
      ...(s.latencyMs.length
        ? { latencyMs: s.latencyMs.reduce((a, x) => a + x, 0) / s.latencyMs.length }
        : {}),
      ...(measuredBps.length ? { throughputBps: harmonicMean(measuredBps) } : {}),
      pricePerGbMonth: s.pricePerGbMonth,
      outageLog: owed,
      blobs: counts.get(s.id)?.blobs ?? 0,
      bad: badHere,
    });
  }
  // Placement on a backend that is not in the set (dropped from the configuration, or
  // replaced without the configuration following): shown down, since nothing can read it.
  for (const [id, c] of counts) {
    if (ids.includes(id)) continue;
    backends.push({
      id,
      name: `${id} (not in the configured backends)`,
      class: 'cost',
      state: 'down',
      pricePerGbMonth: 0,
      outageLog: await tier.store.logCount(id),
      blobs: c.blobs,
      bad: c.bad,
    });
  }
  return {
    backends,
    risk,
    outageLog: backends.reduce((a, b) => a + b.outageLog, 0),
  };
}
