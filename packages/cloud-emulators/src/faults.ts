/**
 * Deterministic fault injection, shared by every emulator. Rules are set per test (in
 * process, or over HTTP at /__emulator/faults) and decide per request from counters —
 * never from random timing — so a test that uses them gives the same outcome every run.
 *
 * A rule matches requests by endpoint (the emulator's name for the operation, e.g.
 * 'files/upload', 'files.create', 'driveItem.content') and method, then fires on:
 *   - `rate`: a fraction of matching requests, spread evenly (request n fires when
 *     floor((n+1)·rate) > floor(n·rate)); 0.1 fires on the 10th, 20th, … match;
 *   - `nth`: the listed 0-based indices of matching requests;
 *   - neither: every matching request;
 * and stops after `times` firings.
 */
import { z } from 'zod';

export const FaultActionSchema = z.discriminatedUnion('kind', [
  /** Answer with this status and the provider's throttling/error body, with Retry-After when given. */
  z.object({
    kind: z.literal('status'),
    status: z.number().int().min(400).max(599),
    retryAfterSeconds: z.number().int().min(0).optional(),
    /**
     * How Retry-After is written: delay-seconds (default) or an HTTP-date that many seconds
     * ahead (RFC 9110 §10.2.3 allows both; clients must read either).
     */
    retryAfterForm: z.enum(['seconds', 'http-date']).optional(),
    /** Provider-specific flavour, e.g. 'too_many_write_operations' (Dropbox), 'userRateLimitExceeded' (Drive). */
    reason: z.string().optional(),
  }),
  /**
   * Drop the connection: 'before' the request is handled (nothing happened), 'after' it
   * was handled (the change happened but the client never hears), or 'mid-body' after
   * `afterBytes` bytes of the response body.
   */
  z.object({
    kind: z.literal('reset'),
    when: z.enum(['before', 'after', 'mid-body']),
    afterBytes: z.number().int().min(0).optional(),
  }),
  /** Wait this long before handling the request. */
  z.object({ kind: z.literal('latency'), ms: z.number().int().min(0) }),
  /** Send the response body no faster than this. */
  z.object({ kind: z.literal('bandwidth'), bytesPerSecond: z.number().int().min(1) }),
]);
export type FaultAction = z.infer<typeof FaultActionSchema>;

export const FaultRuleSchema = z.object({
  /** Exact endpoint name, or '*' for all. Default '*'. */
  endpoint: z.string().default('*'),
  method: z.string().optional(),
  rate: z.number().min(0).max(1).optional(),
  nth: z.array(z.number().int().min(0)).optional(),
  times: z.number().int().min(1).optional(),
  action: FaultActionSchema,
});
export type FaultRule = z.input<typeof FaultRuleSchema>;

interface LiveRule {
  readonly rule: z.infer<typeof FaultRuleSchema>;
  matched: number;
  fired: number;
  /** Fired while another rule had already decided the request: applies to the next match. */
  pending: boolean;
}

export interface FaultDecision {
  readonly status?: Extract<FaultAction, { kind: 'status' }>;
  readonly reset?: Extract<FaultAction, { kind: 'reset' }>;
  readonly latencyMs: number;
  readonly bytesPerSecond?: number;
}

export interface FaultStats {
  readonly requests: number;
  readonly fired: Readonly<Record<string, number>>;
}

export class FaultInjector {
  private rules: LiveRule[] = [];
  private requests = 0;
  private readonly fired = new Map<string, number>();

  /** Add a rule; returns a function that removes it. */
  add(rule: FaultRule): () => void {
    const live: LiveRule = { rule: FaultRuleSchema.parse(rule), matched: 0, fired: 0, pending: false };
    this.rules.push(live);
    return () => {
      this.rules = this.rules.filter((r) => r !== live);
    };
  }

  clear(): void {
    this.rules = [];
  }

  stats(): FaultStats {
    return { requests: this.requests, fired: Object.fromEntries(this.fired) };
  }

  /** Decide what happens to one request. Every matching rule advances its counter. */
  decide(endpoint: string, method: string): FaultDecision {
    this.requests += 1;
    let status: FaultDecision['status'];
    let reset: FaultDecision['reset'];
    let latencyMs = 0;
    let bytesPerSecond: number | undefined;
    for (const live of this.rules) {
      const { rule } = live;
      if (rule.endpoint !== '*' && rule.endpoint !== endpoint) continue;
      if (rule.method !== undefined && rule.method.toUpperCase() !== method.toUpperCase()) continue;
      const n = live.matched++;
      if (rule.times !== undefined && live.fired >= rule.times) continue;
      let fires: boolean;
      if (rule.nth !== undefined) fires = rule.nth.includes(n);
      else if (rule.rate !== undefined) fires = Math.floor((n + 1) * rule.rate) > Math.floor(n * rule.rate);
      else fires = true;
      if (!fires && !live.pending) continue;
      const a = rule.action;
      // One status/reset per request (the first rule wins; a later one waits for the next
      // request, so every rule keeps its rate); latency adds up; the tightest bandwidth wins.
      if (a.kind === 'status' || a.kind === 'reset') {
        if (status || reset) {
          live.pending = true;
          continue;
        }
        live.pending = false;
        if (a.kind === 'status') status = a;
        else reset = a;
      } else if (a.kind === 'latency') latencyMs += a.ms;
      else bytesPerSecond = Math.min(bytesPerSecond ?? Infinity, a.bytesPerSecond);
      live.fired += 1;
      const key = `${endpoint}:${a.kind === 'status' ? a.status : a.kind === 'reset' ? `reset-${a.when}` : a.kind}`;
      this.fired.set(key, (this.fired.get(key) ?? 0) + 1);
    }
    return { status, reset, latencyMs, bytesPerSecond };
  }
}
