/**
 * When to add a relay instance and when to retire one (HyCloud §III-C, Eq. 7–8), as a pure
 * function of the instances' reported figures, so its rules are tested on their own
 * (test/cluster-scale.test.ts) and the supervisor (supervisor.ts) only carries them out.
 *
 * - Congested (Eq. 7): BW_a ≤ BW_o·θ_c. When every active instance has been congested for
 *   `sustainMs`, add one (up to `max`).
 * - Idle (Eq. 8): BW_a ≥ BW_o·θ_l. When every active instance has been idle for `sustainMs`,
 *   retire one (down to `min`): the one with the lowest BW_o (the paper's choice), then the one
 *   with fewest transfers, then the newest. Retiring is lazy — the instance is marked draining
 *   (no new transfers are steered to it) and stopped once its transfers end.
 * - No flapping: θ_c < θ_l; nothing within `cooldownMs` of the previous action; and a drain only
 *   when the load now carried, spread over the instances that remain, would leave them at least
 *   halfway between the two thresholds — so the drain cannot itself make every instance
 *   congested, and under a steady load the count only ever moves one way.
 * - Draining instances count for neither rule (they are on their way out).
 */

export interface ScaleParams {
  thetaCongested: number;
  thetaIdle: number;
  sustainMs: number;
  cooldownMs: number;
  /** Never fewer active instances than this (the supervisor's --instances). */
  min: number;
  /** Never more (--max). */
  max: number;
}

export interface ScaleReading {
  id: string;
  state: 'active' | 'draining';
  availableBps: number;
  measuredBps: number;
  activeTransfers: number;
  startedMs: number;
}

/** What the decision remembers between calls. */
export interface ScaleMemory {
  congestedSince?: number;
  idleSince?: number;
  lastActionMs?: number;
}

export type ScaleDecision =
  | { action: 'none'; reason: string }
  | { action: 'add'; reason: string }
  | { action: 'drain'; id: string; reason: string };

export function congested(r: ScaleReading, p: Pick<ScaleParams, 'thetaCongested'>): boolean {
  return r.availableBps <= r.measuredBps * p.thetaCongested;
}

export function idle(r: ScaleReading, p: Pick<ScaleParams, 'thetaIdle'>): boolean {
  return r.availableBps >= r.measuredBps * p.thetaIdle;
}

/** The instance Eq. 8 retires: lowest BW_o, then fewest transfers, then the newest. */
export function drainTarget(active: readonly ScaleReading[]): ScaleReading | undefined {
  return [...active].sort(
    (a, b) =>
      a.measuredBps - b.measuredBps ||
      a.activeTransfers - b.activeTransfers ||
      b.startedMs - a.startedMs ||
      (a.id < b.id ? 1 : -1),
  )[0];
}

/** The share of BW_o left on `remaining` if they carried everything `active` carries now. */
export function availableShareAfter(
  active: readonly ScaleReading[],
  remaining: readonly ScaleReading[],
): number {
  const used = active.reduce((s, r) => s + Math.max(0, r.measuredBps - r.availableBps), 0);
  const capacity = remaining.reduce((s, r) => s + r.measuredBps, 0);
  return capacity <= 0 ? 0 : 1 - used / capacity;
}

export function decideScale(
  readings: readonly ScaleReading[],
  memory: ScaleMemory,
  nowMs: number,
  p: ScaleParams,
): { decision: ScaleDecision; memory: ScaleMemory } {
  const active = readings.filter((r) => r.state === 'active');
  const allCongested = active.length > 0 && active.every((r) => congested(r, p));
  const allIdle = active.length > 0 && active.every((r) => idle(r, p));
  const next: ScaleMemory = {
    ...(allCongested ? { congestedSince: memory.congestedSince ?? nowMs } : {}),
    ...(allIdle ? { idleSince: memory.idleSince ?? nowMs } : {}),
    ...(memory.lastActionMs !== undefined ? { lastActionMs: memory.lastActionMs } : {}),
  };
  const none = (reason: string) => ({ decision: { action: 'none' as const, reason }, memory: next });
  if (memory.lastActionMs !== undefined && nowMs - memory.lastActionMs < p.cooldownMs)
    return none('cooling down after the last action');
  if (active.length < p.min)
    return act({ action: 'add', reason: `${active.length} active, fewer than ${p.min}` });
  if (allCongested) {
    if (nowMs - next.congestedSince! < p.sustainMs) return none('all congested, not yet for long');
    if (active.length >= p.max) return none(`all congested, but already ${p.max} (the maximum)`);
    return act({ action: 'add', reason: `all ${active.length} congested (Eq. 7) for ${p.sustainMs} ms` });
  }
  if (allIdle) {
    if (nowMs - next.idleSince! < p.sustainMs) return none('all idle, not yet for long');
    if (active.length <= p.min) return none(`all idle, but only ${p.min} (the minimum)`);
    const target = drainTarget(active)!;
    const after = availableShareAfter(
      active,
      active.filter((r) => r.id !== target.id),
    );
    if (after < (p.thetaCongested + p.thetaIdle) / 2)
      return none('all idle, but the rest would be too busy without one');
    return act({
      action: 'drain',
      id: target.id,
      reason: `all ${active.length} idle (Eq. 8) for ${p.sustainMs} ms`,
    });
  }
  return none('neither all congested nor all idle');

  function act(decision: ScaleDecision): { decision: ScaleDecision; memory: ScaleMemory } {
    return { decision, memory: { lastActionMs: nowMs } };
  }
}
