/**
 * Enrolment: one-time invites made with the admin token, and devices enrolled with the
 * admin token or an invite. Refused attempts are counted per address (FailureLimiter), so
 * guessing invites or the admin token is slowed down; a refused attempt changes nothing.
 */
import { randomBytes } from 'node:crypto';
import { adminTokenMatches, FailureLimiter, hashSecret, newInvite, newToken } from './auth.ts';
import { ApiError } from './errors.ts';
import type { MetadataStore } from './store/metadata.ts';

export interface EnrolmentOptions {
  readonly meta: MetadataStore;
  /** Create the user's namespace (tier folder and index row) before its first device. */
  readonly ensureNamespace: (userId: string) => Promise<void>;
  /** SHA-256 of the admin token (the token itself need not be held). */
  readonly adminTokenSha256: string;
  readonly inviteTtlMs: number;
  readonly failuresPerMinute: number;
  readonly now?: () => number;
}

export class Enrolment {
  private readonly failures: FailureLimiter;
  private readonly now: () => number;

  constructor(private readonly o: EnrolmentOptions) {
    this.now = o.now ?? Date.now;
    this.failures = new FailureLimiter(o.failuresPerMinute);
  }

  /** FORBIDDEN unless `token` is the admin token. */
  requireAdmin(token: string | undefined): void {
    if (!token || !adminTokenMatches(token, this.o.adminTokenSha256))
      throw new ApiError('FORBIDDEN', 'admin token required');
  }

  /** A new one-time invite for `user`, valid for `ttlHours` (default: the configured TTL). */
  async invite(user: string, ttlHours: number | undefined): Promise<{ invite: string; expiresMs: number }> {
    const invite = newInvite();
    const now = this.now();
    const expiresMs = now + (ttlHours !== undefined ? Math.round(ttlHours * 3600_000) : this.o.inviteTtlMs);
    await this.o.meta.addInvite(hashSecret(invite), user, now, expiresMs);
    return { invite, expiresMs };
  }

  /** Milliseconds `address` must wait after too many refused enrolments (0: none). */
  blockedFor(address: string): number {
    return this.failures.blockedFor(address);
  }

  /**
   * Enrol a device of `user` with an invite (used only by its own user: a refused attempt
   * — another user's name, a wrong or expired invite — changes nothing, so the rightful
   * redeemer can still use it) or, without one, the admin token. A refusal counts against
   * `address`.
   */
  async enrol(
    address: string,
    request: { user: string; deviceName: string; invite?: string | undefined },
    adminToken: string | undefined,
  ): Promise<{ token: string; deviceId: string }> {
    try {
      if (request.invite !== undefined) {
        const used = await this.o.meta.consumeInvite(hashSecret(request.invite), request.user, this.now());
        if (!used.ok && used.reason === 'expired')
          throw new ApiError('INVITE_EXPIRED', 'this invite has expired; ask for a new one');
        if (!used.ok) throw new ApiError('FORBIDDEN', 'invalid or used invite');
      } else this.requireAdmin(adminToken);
    } catch (e) {
      this.failures.fail(address);
      throw e;
    }
    return this.enrolDevice(request.user, request.deviceName);
  }

  /** Enrol a device directly (no invite, no admin token: `npm start` and tests). */
  async enrolDevice(user: string, deviceName: string): Promise<{ token: string; deviceId: string }> {
    await this.o.ensureNamespace(user);
    const token = newToken();
    const deviceId = 'd_' + randomBytes(8).toString('hex');
    await this.o.meta.addDevice(
      { id: deviceId, userId: user, name: deviceName },
      hashSecret(token),
      this.now(),
    );
    return { token, deviceId };
  }
}
