/**
 * Mutual authentication of two proxies by the secret configured for their pair
 * (docs/formats/inter-proxy.md, "Authentication"). The secret never crosses the wire:
 *
 * - The source signs its upgrade request: HMAC-SHA256(secret, "weft-peer-client" ‖ from ‖
 *   to ‖ time ‖ nonce), sent with the time and a fresh nonce. The destination refuses the
 *   upgrade (401) for an unknown peer, a time more than 5 minutes off, a nonce seen before,
 *   or a wrong MAC — before any protocol state exists.
 * - The destination's `welcome` carries HMAC(secret, "weft-peer-server" ‖ to ‖ from ‖
 *   nonce ‖ session); the source checks it before sending any file data, so an impostor
 *   destination (e.g. a hijacked address without TLS) learns nothing but metadata-free hellos.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { type Clock, systemClock } from '../clock.ts';
import { MirrorError } from '../errors.ts';

export const HEADER_PEER = 'x-weft-peer';
export const HEADER_PEER_TIME = 'x-weft-peer-time';
export const HEADER_PEER_NONCE = 'x-weft-peer-nonce';
export const AUTH_SCHEME = 'WeftPeer';
/** Accepted clock difference between two proxies. */
export const MAX_CLOCK_SKEW_MS = 5 * 60 * 1000;
export const MIN_SECRET_LENGTH = 32;

/** A peer's upgrade request or proof failed authentication. */
export class PeerAuthError extends MirrorError {
  readonly code = 'PeerAuth' as const;
}

function mac(secret: string, parts: readonly string[]): string {
  return createHmac('sha256', secret).update(parts.join('\n')).digest('hex');
}

function equalHex(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}

/** Headers of the source's upgrade request. */
export function signUpgrade(
  from: string,
  to: string,
  secret: string,
  now = systemClock(),
): { headers: Record<string, string>; nonce: string } {
  const nonce = randomBytes(16).toString('hex');
  const time = String(now);
  return {
    nonce,
    headers: {
      [HEADER_PEER]: from,
      [HEADER_PEER_TIME]: time,
      [HEADER_PEER_NONCE]: nonce,
      authorization: `${AUTH_SCHEME} ${mac(secret, ['weft-peer-client', from, to, time, nonce])}`,
    },
  };
}

export function serverProof(
  secret: string,
  to: string,
  from: string,
  nonce: string,
  session: string,
): string {
  return mac(secret, ['weft-peer-server', to, from, nonce, session]);
}

export function checkServerProof(
  secret: string,
  to: string,
  from: string,
  nonce: string,
  session: string,
  proof: string,
): boolean {
  return equalHex(serverProof(secret, to, from, nonce, session), proof);
}

/** The destination's side: who may connect, and the nonces already used. */
export class PeerAuthenticator {
  private readonly seen = new Map<string, number>();

  constructor(
    readonly selfId: string,
    private readonly secrets: ReadonlyMap<string, string>,
    private readonly now: Clock = systemClock,
  ) {
    for (const [id, s] of secrets) {
      if (s.length < MIN_SECRET_LENGTH)
        throw new PeerAuthError(`secret of peer ${id} is shorter than 32 characters`);
    }
  }

  secretOf(peer: string): string | undefined {
    return this.secrets.get(peer);
  }

  /** Check an upgrade request's headers; returns the peer and its nonce, or throws PeerAuthError. */
  verify(headers: Record<string, string | string[] | undefined>): { peer: string; nonce: string } {
    const one = (name: string): string => {
      const v = headers[name];
      const s = Array.isArray(v) ? v[0] : v;
      if (typeof s !== 'string' || s === '') throw new PeerAuthError(`missing ${name}`);
      return s;
    };
    const peer = one(HEADER_PEER);
    const time = one(HEADER_PEER_TIME);
    const nonce = one(HEADER_PEER_NONCE);
    const m = /^WeftPeer ([0-9a-f]{64})$/.exec(one('authorization'));
    if (!m?.[1]) throw new PeerAuthError('authorization is not "WeftPeer <hex mac>"');
    if (!/^[0-9a-f]{32}$/.test(nonce)) throw new PeerAuthError('bad nonce');
    const secret = this.secrets.get(peer);
    if (!secret) throw new PeerAuthError(`unknown peer ${JSON.stringify(peer.slice(0, 64))}`);
    const t = Number(time);
    const now = this.now();
    if (!Number.isSafeInteger(t) || Math.abs(now - t) > MAX_CLOCK_SKEW_MS)
      throw new PeerAuthError('request time is more than 5 minutes off');
    if (!equalHex(mac(secret, ['weft-peer-client', peer, this.selfId, time, nonce]), m[1]))
      throw new PeerAuthError('bad signature');
    for (const [n, at] of this.seen) if (now - at > 2 * MAX_CLOCK_SKEW_MS) this.seen.delete(n);
    if (this.seen.has(nonce)) throw new PeerAuthError('nonce replayed');
    this.seen.set(nonce, now);
    return { peer, nonce };
  }
}
