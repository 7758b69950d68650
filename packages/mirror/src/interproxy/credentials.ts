/**
 * Cloud credentials handed to a peer proxy (docs/formats/inter-proxy.md, "Routing"): the
 * hosting proxy seals an account's token set with a key derived from the pair's secret
 * (HKDF-SHA256, info "weft-peer-credentials"), AES-256-GCM with a fresh 96-bit IV and the
 * cloud name as additional data. Only the two proxies of that pair can open it; tokens never
 * cross the link in the clear, even over ws:// in tests.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

function keyOf(secret: string): Buffer {
  return Buffer.from(
    hkdfSync('sha256', Buffer.from(secret, 'utf8'), Buffer.alloc(0), 'weft-peer-credentials', 32),
  );
}

/** base64url(iv ‖ ciphertext ‖ tag) of the JSON of `value`. */
export function sealCredentials(secret: string, cloud: string, value: unknown): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', keyOf(secret), iv);
  c.setAAD(Buffer.from(cloud, 'utf8'));
  const body = Buffer.concat([c.update(JSON.stringify(value), 'utf8'), c.final()]);
  return Buffer.concat([iv, body, c.getAuthTag()]).toString('base64url');
}

/** The sealed value, or a throw when it was not sealed for this pair and cloud. */
export function openCredentials(secret: string, cloud: string, sealed: string): unknown {
  const raw = Buffer.from(sealed, 'base64url');
  if (raw.byteLength < 12 + 16) throw new Error('sealed credentials too short');
  const d = createDecipheriv('aes-256-gcm', keyOf(secret), raw.subarray(0, 12));
  d.setAAD(Buffer.from(cloud, 'utf8'));
  d.setAuthTag(raw.subarray(raw.byteLength - 16));
  const text = Buffer.concat([d.update(raw.subarray(12, raw.byteLength - 16)), d.final()]).toString('utf8');
  return JSON.parse(text) as unknown;
}
