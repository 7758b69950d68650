/**
 * The redundant tier's backend config (issue #17): cloud accounts need a way to get an
 * access token and an https (or loopback) API origin; `migrateFrom` takes the former
 * single store. The five-backend e2e (e2e/test/redundant-five-backends.test.ts) runs the
 * Dropbox and Drive backends for real against the emulators.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config.ts';

const tier = (backends: object[], extra: object = {}) => ({
  objectTier: {
    type: 'redundant',
    backends: [{ id: 'disk', type: 'fs', dir: '/srv/a' }, ...backends],
    ...extra,
  },
});

describe('redundant tier backend config', () => {
  it('acceptsCloudAccounts', () => {
    const c = parseConfig(
      tier([
        { id: 'dbx', type: 'dropbox', accessToken: 't', baseUrl: 'http://127.0.0.1:4000' },
        {
          id: 'drive',
          type: 'gdrive',
          refreshToken: 'r',
          clientId: 'c',
          clientSecret: 's',
          root: '.weft-storage',
        },
        { id: 'od', type: 'onedrive', accessToken: 't', graphOrigin: 'https://localhost:4443' },
      ]),
    );
    expect(c.objectTier.type).toBe('redundant');
    if (c.objectTier.type !== 'redundant') return;
    expect(c.objectTier.backends.map((b) => b.type)).toEqual(['fs', 'dropbox', 'gdrive', 'onedrive']);
    expect(c.objectTier.backends[1]).toMatchObject({ root: '', retryAttempts: 3 });
  });

  it('refusesACloudAccountWithoutCredentials', () => {
    expect(() => parseConfig(tier([{ id: 'dbx', type: 'dropbox' }]))).toThrow(/accessToken/);
    expect(() => parseConfig(tier([{ id: 'dbx', type: 'dropbox', refreshToken: 'r' }]))).toThrow(
      /accessToken/,
    );
  });

  it('refusesAPlainHttpOriginOffLoopback', () => {
    expect(() =>
      parseConfig(tier([{ id: 'dbx', type: 'dropbox', accessToken: 't', baseUrl: 'http://example.com' }])),
    ).toThrow(/https/);
  });

  it('takesTheFormerStoreToMigrateFrom', () => {
    const two = [{ id: 'b', type: 'fs', dir: '/srv/b' }];
    const c = parseConfig(tier(two, { migrateFrom: { type: 'fs' } }));
    expect(c.objectTier).toMatchObject({ migrateFrom: { type: 'fs' } });
    const s3 = parseConfig(tier(two, { migrateFrom: { type: 's3', bucket: 'old' } }));
    expect(s3.objectTier).toMatchObject({ migrateFrom: { type: 's3', bucket: 'old', prefix: '' } });
    expect(() => parseConfig(tier(two, { migrateFrom: { type: 'dropbox' } }))).toThrow();
  });
});
