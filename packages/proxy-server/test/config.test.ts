import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as https from 'node:https';
import * as nodePath from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../src/config.ts';
import { startTestServer, tempDir } from './helpers.ts';

const BIN = nodePath.resolve(fileURLToPath(import.meta.url), '../../bin/weft-proxy.mjs');

describe('configuration', () => {
  it('fillsDefaultsAndAppliesEnvironmentOverrides', () => {
    const c = parseConfig(
      { port: 8080, dataDir: '/srv/weft' },
      { WEFT_PROXY_PORT: '9090', WEFT_PROXY_S3_BUCKET: 'b', WEFT_PROXY_S3_ENDPOINT: 'http://s3' },
    );
    expect(c).toMatchObject({
      host: '127.0.0.1',
      port: 9090,
      dataDir: '/srv/weft',
      smallFileBytes: 2 * 1024 * 1024,
      relayCacheBytes: 1024 ** 3,
      gcGraceMs: 86_400_000,
    });
    expect(c.objectTier).toMatchObject({ type: 's3', bucket: 'b', endpoint: 'http://s3' });
    expect(parseConfig({}).objectTier).toEqual({ type: 'fs' });
  });

  it('rejectsInvalidSettingsWithAClearMessage', () => {
    expect(() => parseConfig({ port: 'x' })).toThrow(ConfigError);
    expect(() => parseConfig({}, { WEFT_PROXY_PORT: '-1' })).toThrow(/port/);
  });

  it('takesTheSharesReplicaProbeBackoff', () => {
    expect(parseConfig({}).shares.probeBackoffMs).toBeUndefined();
    expect(
      parseConfig({ shares: { probeBackoffMs: { first: 100, max: 1000 } } }).shares.probeBackoffMs,
    ).toEqual({
      first: 100,
      max: 1000,
    });
    expect(parseConfig({ shares: { probeBackoffMs: { max: 5000 } } }).shares.probeBackoffMs).toEqual({
      first: 2000,
      max: 5000,
    });
    expect(() => parseConfig({ shares: { probeBackoffMs: { first: 5000, max: 1000 } } })).toThrow(
      /probeBackoffMs: first must not exceed max/,
    );
    expect(() => parseConfig({ shares: { probeBackoffMs: { first: -1 } } })).toThrow(ConfigError);
  });

  it('takesAShareOAuthTokenUrlOnlyOverHttpsOrOnLoopback', () => {
    const oauth = (tokenUrl: string) => ({ shares: { oauth: { dropbox: { clientId: 'k', tokenUrl } } } });
    expect(parseConfig(oauth('http://127.0.0.1:4000/oauth2/token')).shares.oauth.dropbox).toEqual({
      clientId: 'k',
      tokenUrl: 'http://127.0.0.1:4000/oauth2/token',
    });
    expect(parseConfig(oauth('https://api.example/token')).shares.oauth.dropbox?.tokenUrl).toBe(
      'https://api.example/token',
    );
    expect(() => parseConfig(oauth('http://example.com/token'))).toThrow(/https: URL/);
    expect(() => parseConfig(oauth('not a url'))).toThrow(ConfigError);
  });

  it('acceptsOnlyTheHashOfTheAdminToken', async () => {
    const token = 'wfa_the-admin-token-of-this-test';
    const hash = createHash('sha256').update(token).digest('hex');
    expect(parseConfig({}, { WEFT_PROXY_ADMIN_TOKEN_SHA256: hash }).adminTokenSha256).toBe(hash);
    expect(() => parseConfig({ adminTokenSha256: 'abc' })).toThrow(/64 lowercase hex/);
    expect(() => parseConfig({ adminTokenSha256: hash.toUpperCase() })).toThrow(ConfigError);
    expect(() => parseConfig({ adminToken: token, adminTokenSha256: hash })).toThrow(/not both/);
    const server = await startTestServer({ adminTokenSha256: hash });
    try {
      // The server holds no plaintext to hand out…
      expect(() => server.adminToken).toThrow(/only the admin token’s hash/);
      const enrol = (bearer: string): Promise<Response> =>
        fetch(`${server.url}/v1/enrol`, {
          method: 'POST',
          headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
          body: JSON.stringify({ user: 'alice', deviceName: 'laptop' }),
        });
      // …yet the token whose hash it holds enrols, and anything else does not.
      expect((await enrol(token)).status).toBe(201);
      expect((await enrol(token + 'x')).status).toBe(403);
      expect((await enrol(hash)).status).toBe(403);
      expect((await enrol(token.slice(0, -1))).status).toBe(403);
    } finally {
      await server.stop();
    }
  });

  it('cliStartsWithOnlyTheAdminTokenHash', async () => {
    const dir = await tempDir('weft-cli-hash-');
    const token = 'wfa_the-admin-token-the-cli-never-sees';
    const child = spawn(process.execPath, [BIN], {
      env: {
        ...process.env,
        WEFT_PROXY_DATA_DIR: dir,
        WEFT_PROXY_PORT: '0',
        WEFT_PROXY_LOG_LEVEL: 'silent',
        WEFT_PROXY_ADMIN_TOKEN_SHA256: createHash('sha256').update(token).digest('hex'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      let out = '';
      const url = await new Promise<string>((resolve, reject) => {
        const onData = (b: Buffer): void => {
          out += b.toString();
          const m = /weft-proxy listening on (http:\/\/\S+)/.exec(out);
          if (m?.[1]) resolve(m[1]);
        };
        child.stdout.on('data', onData);
        child.stderr.on('data', onData);
        child.once('exit', (code) => reject(new Error(`weft-proxy exited (${code}): ${out}`)));
      });
      // No token to print (the server only has its hash), and the token enrols.
      expect(out).not.toContain('admin token for this run');
      const res = await fetch(`${url}/v1/enrol`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ user: 'alice', deviceName: 'laptop' }),
      });
      expect(res.status).toBe(201);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });

  it('servesHttpsWhenACertificateIsConfigured', async () => {
    const dir = await tempDir('weft-tls-');
    const key = nodePath.join(dir, 'key.pem');
    const cert = nodePath.join(dir, 'cert.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        key,
        '-out',
        cert,
        '-days',
        '1',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ],
      { stdio: 'ignore' },
    );
    const server = await startTestServer({ tls: { certFile: cert, keyFile: key } });
    try {
      expect(server.url.startsWith('https://')).toBe(true);
      const ca = await fsp.readFile(cert);
      const body = await new Promise<string>((resolve, reject) => {
        https
          .get(`${server.url}/healthz`, { ca }, (res) => {
            let text = '';
            res.on('data', (d: Buffer) => (text += d.toString()));
            res.on('end', () => resolve(text));
          })
          .on('error', reject);
      });
      expect(JSON.parse(body)).toMatchObject({ status: 'ok' });
    } finally {
      await server.stop();
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });
});
