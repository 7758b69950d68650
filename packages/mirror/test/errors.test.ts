/**
 * The mirror's errors are one hierarchy with a `code` to switch on; the engine tells
 * provider failures apart by class.
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { MemoryProvider, NotFoundError, PreconditionFailedError, TransientError } from '@weft/providers';
import { MirrorEngine } from '../src/engine.ts';
import { MirrorConfigError, MirrorError, NotQuiescentError } from '../src/errors.ts';
import { BatchError, validateBatch } from '../src/interproxy/compare.ts';
import { PeerAuthError, PeerAuthenticator } from '../src/interproxy/auth.ts';
import { isNotFound, isPreconditionFailed } from '../src/provider-failures.ts';
import { ShareError, ShareRegistry } from '../src/shares.ts';
import { migrate } from '../src/store.ts';
import { VaultError, CredentialVault } from '../src/vault.ts';

function db(): Database.Database {
  const d = new Database(':memory:');
  migrate(d);
  return d;
}

describe('mirror errors', () => {
  it('two replicas with one id: a MirrorConfigError, code InvalidConfig', () => {
    const p = new MemoryProvider();
    const make = () =>
      new MirrorEngine({
        shareId: 's',
        db: db(),
        replicas: [
          { id: 'x', member: 'a', provider: p, root: '' },
          { id: 'x', member: 'b', provider: p, root: 'b' },
        ],
      });
    expect(make).toThrow(MirrorConfigError);
    try {
      make();
    } catch (e) {
      expect(e).toBeInstanceOf(MirrorError);
      expect((e as MirrorError).code).toBe('InvalidConfig');
      expect((e as Error).name).toBe('MirrorConfigError');
    }
  });

  it('quiesce() out of rounds: a NotQuiescentError', async () => {
    const a = new MemoryProvider();
    const b = new MemoryProvider();
    await a.write('f.txt', new TextEncoder().encode('x'));
    const engine = new MirrorEngine({
      shareId: 's',
      db: db(),
      replicas: [
        { id: 'a', member: 'a', provider: a, root: '' },
        { id: 'b', member: 'b', provider: b, root: '' },
      ],
    });
    const err = await engine.quiesce(1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotQuiescentError);
    expect((err as MirrorError).code).toBe('NotQuiescent');
  });

  it('registry, vault, peer auth and batch errors are MirrorErrors with their codes', () => {
    const reg = new ShareRegistry(db());
    const share = (() => {
      try {
        reg.get('nope');
      } catch (e) {
        return e;
      }
    })();
    expect(share).toBeInstanceOf(ShareError);
    expect(share).toBeInstanceOf(MirrorError);
    expect((share as ShareError).code).toBe('NotFound');

    const vault = (() => {
      try {
        new CredentialVault(db(), { currentKeyId: 'k', keys: {} });
      } catch (e) {
        return e;
      }
    })();
    expect(vault).toBeInstanceOf(VaultError);
    expect((vault as VaultError).code).toBe('Vault');

    const auth = new PeerAuthenticator('proxy-b', new Map([['proxy-a', 'x'.repeat(32)]]));
    const peer = (() => {
      try {
        auth.verify({});
      } catch (e) {
        return e;
      }
    })();
    expect(peer).toBeInstanceOf(PeerAuthError);
    expect((peer as PeerAuthError).code).toBe('PeerAuth');

    const batch = (() => {
      try {
        validateBatch([{ path: 'a', size: -1, sha256: 'x' }]);
      } catch (e) {
        return e;
      }
    })();
    expect(batch).toBeInstanceOf(BatchError);
    expect((batch as BatchError).code).toBe('BadBatch');
  });

  it('provider failures are told apart by class, not by a code string', () => {
    expect(isNotFound(new NotFoundError('gone'))).toBe(true);
    expect(isNotFound({ code: 'NotFound', message: 'look-alike' })).toBe(false);
    expect(isNotFound(new TransientError('503'))).toBe(false);
    expect(isPreconditionFailed(new PreconditionFailedError('lost', 'r2'))).toBe(true);
  });
});
