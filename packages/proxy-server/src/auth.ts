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

export function safeEqual(a: string, b: string): boolean {
  const x = createHash('sha256').update(a).digest();
  const y = createHash('sha256').update(b).digest();
  return timingSafeEqual(x, y);
}
