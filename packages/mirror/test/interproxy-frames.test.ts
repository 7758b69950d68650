/** Frame codec, message validation and peer authentication of the inter-proxy link. */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  HEADER_PEER_TIME,
  PeerAuthenticator,
  PeerAuthError,
  checkServerProof,
  serverProof,
  signUpgrade,
} from '../src/interproxy/auth.ts';
import {
  DestinationMessage,
  FrameError,
  FrameTag,
  NO_FILE,
  SourceMessage,
  decodeFrame,
  encodeFrame,
  parseMessage,
} from '../src/interproxy/frames.ts';

const session = randomBytes(16).toString('hex');
const SECRET = randomBytes(32).toString('hex');

describe('frames', () => {
  it('round-trips and rejects what is not a frame of this version', () => {
    const payload = randomBytes(1000);
    const bytes = encodeFrame({ tag: FrameTag.Bundle, session, seq: 7, batch: 3, file: NO_FILE, payload });
    const f = decodeFrame(bytes, 4096);
    expect(f).toMatchObject({ tag: FrameTag.Bundle, session, seq: 7, batch: 3, file: NO_FILE });
    expect(Buffer.from(f.payload).equals(payload)).toBe(true);

    expect(() => decodeFrame(bytes, 500)).toThrow(FrameError); // over the limit
    expect(() => decodeFrame(bytes.subarray(0, 20), 4096)).toThrow(/truncated/);
    const badTag = Uint8Array.from(bytes);
    badTag[0] = 9;
    expect(() => decodeFrame(badTag, 4096)).toThrow(/unknown frame tag/);
    const badVersion = Uint8Array.from(bytes);
    badVersion[1] = 2;
    expect(() => decodeFrame(badVersion, 4096)).toThrow(/unsupported frame version/);
    expect(() =>
      encodeFrame({ tag: FrameTag.Whole, session: 'xyz', seq: 0, batch: 0, file: 0, payload }),
    ).toThrow(FrameError);
  });

  it('validates control messages: non-canonical paths, bad hashes and unknown types are refused', () => {
    const sha = 'a'.repeat(64);
    expect(
      parseMessage(
        SourceMessage,
        JSON.stringify({ type: 'batch', batch: 1, files: [{ path: 'a/b.txt', size: 3, sha256: sha }] }),
      ),
    ).toBeDefined();
    for (const path of ['../x', '/abs', 'a//b', 'Cafe\u0301.txt']) {
      expect(
        parseMessage(
          SourceMessage,
          JSON.stringify({ type: 'batch', batch: 1, files: [{ path, size: 3, sha256: sha }] }),
        ),
      ).toBeUndefined();
    }
    expect(
      parseMessage(
        SourceMessage,
        JSON.stringify({ type: 'batch', batch: 1, files: [{ path: 'a', size: 3, sha256: 'ABC' }] }),
      ),
    ).toBeUndefined();
    expect(parseMessage(SourceMessage, '{"type":"drop-table"}')).toBeUndefined();
    expect(parseMessage(DestinationMessage, 'not json')).toBeUndefined();
    expect(parseMessage(DestinationMessage, JSON.stringify({ type: 'ack', seq: -1 }))).toBeUndefined();
  });
});

describe('peer authentication', () => {
  it('accepts a signed upgrade once, and refuses replays, skewed clocks, unknown peers and wrong secrets', () => {
    let now = 1_700_000_000_000;
    const auth = new PeerAuthenticator('proxy-b', new Map([['proxy-a', SECRET]]), () => now);
    const { headers, nonce } = signUpgrade('proxy-a', 'proxy-b', SECRET, now);
    expect(auth.verify(headers)).toEqual({ peer: 'proxy-a', nonce });
    expect(() => auth.verify(headers)).toThrow(/replayed/);

    const late = signUpgrade('proxy-a', 'proxy-b', SECRET, now - 6 * 60 * 1000).headers;
    expect(() => auth.verify(late)).toThrow(/5 minutes/);
    const wrong = signUpgrade('proxy-a', 'proxy-b', randomBytes(32).toString('hex'), now).headers;
    expect(() => auth.verify(wrong)).toThrow(/bad signature/);
    const forOther = signUpgrade('proxy-a', 'proxy-c', SECRET, now).headers; // signed for another destination
    expect(() => auth.verify(forOther)).toThrow(/bad signature/);
    const stranger = signUpgrade('proxy-z', 'proxy-b', SECRET, now).headers;
    expect(() => auth.verify(stranger)).toThrow(/unknown peer/);
    const tampered = {
      ...signUpgrade('proxy-a', 'proxy-b', SECRET, now).headers,
      [HEADER_PEER_TIME]: String(now + 1),
    };
    expect(() => auth.verify(tampered)).toThrow(PeerAuthError);
    expect(() => auth.verify({})).toThrow(/missing/);
    now += 1;
    expect(() => new PeerAuthenticator('b', new Map([['a', 'short']]))).toThrow(/32 characters/);
  });

  it("the destination's proof binds the secret, both ids, the nonce and the session", () => {
    const nonce = randomBytes(16).toString('hex');
    const proof = serverProof(SECRET, 'proxy-b', 'proxy-a', nonce, session);
    expect(checkServerProof(SECRET, 'proxy-b', 'proxy-a', nonce, session, proof)).toBe(true);
    expect(
      checkServerProof(SECRET, 'proxy-b', 'proxy-a', randomBytes(16).toString('hex'), session, proof),
    ).toBe(false);
    expect(checkServerProof(SECRET, 'proxy-x', 'proxy-a', nonce, session, proof)).toBe(false);
    expect(
      checkServerProof(randomBytes(32).toString('hex'), 'proxy-b', 'proxy-a', nonce, session, proof),
    ).toBe(false);
    expect(checkServerProof(SECRET, 'proxy-b', 'proxy-a', nonce, session, 'zz')).toBe(false);
  });
});
