/** Device tokens and admin checks. Tokens are random; only their SHA-256 is stored. */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export interface AuthContext {
  readonly userId: string;
  readonly deviceId: string;
  readonly deviceName: string;
}

export function newToken(): string {
  return 'wft_' + randomBytes(32).toString('base64url');
}

export function newInvite(): string {
  return 'wfi_' + randomBytes(24).toString('base64url');
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

export function bearer(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer\s+(\S+)$/i.exec(header);
  return m?.[1];
}

/**
 * Whether `token` is the admin token whose SHA-256 (hex) is `sha256Hex`, in constant time
 * (the config may hold only the hash: `adminTokenSha256`).
 */
export function adminTokenMatches(token: string, sha256Hex: string): boolean {
  const x = createHash('sha256').update(token, 'utf8').digest();
  const y = Buffer.from(sha256Hex, 'hex');
  return y.length === x.length && timingSafeEqual(x, y);
}

export function safeEqual(a: string, b: string): boolean {
  const x = createHash('sha256').update(a).digest();
  const y = createHash('sha256').update(b).digest();
  return timingSafeEqual(x, y);
}

/**
 * Refused attempts per client address in a sliding minute (enrolment with a bad invite or
 * admin token). Invites are 192 random bits, so guessing is hopeless anyway; the limit keeps
 * a client from hammering the endpoint and the log. A refused attempt never uses an invite.
 */
export class FailureLimiter {
  private readonly failures = new Map<string, number[]>();

  constructor(
    private readonly perMinute: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Milliseconds until `key` may try again (0: now). */
  blockedFor(key: string): number {
    const times = this.recent(key);
    if (times.length < this.perMinute) return 0;
    return Math.max(1, (times[0] ?? 0) + 60_000 - this.now());
  }

  fail(key: string): void {
    const times = this.recent(key);
    times.push(this.now());
    this.failures.set(key, times);
    // Forget idle addresses now and then, so the map stays small.
    if (this.failures.size > 10_000) for (const k of [...this.failures.keys()]) this.recent(k);
  }

  private recent(key: string): number[] {
    const cutoff = this.now() - 60_000;
    const times = (this.failures.get(key) ?? []).filter((t) => t > cutoff);
    if (times.length === 0) this.failures.delete(key);
    else this.failures.set(key, times);
    return times;
  }
}
