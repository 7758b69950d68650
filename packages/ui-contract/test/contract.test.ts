/**
 * The contract package is shared by the renderer, Electron main and the agent: it must stay
 * pure (zod only), and every method must validate its input strictly.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { describe, expect, it } from 'vitest';
import { api, dispatch, type ApiHandlers } from '../src/index.ts';

describe('ui-contract', () => {
  it('imports nothing but zod and its own files', async () => {
    const dir = nodePath.resolve(import.meta.dirname, '..', 'src');
    const bad: string[] = [];
    for (const f of await fsp.readdir(dir)) {
      const text = await fsp.readFile(nodePath.join(dir, f), 'utf8');
      for (const m of text.matchAll(/(?:import|export)[^'"]*?from\s+['"]([^'"]+)['"]/g)) {
        const spec = m[1] ?? '';
        if (spec !== 'zod' && !spec.startsWith('./')) bad.push(`${f} → ${spec}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('rejects unknown fields on every method', async () => {
    const handlers = new Proxy({} as ApiHandlers, {
      get: () => async () => {
        throw new Error('handler must not run');
      },
    });
    for (const m of Object.keys(api)) {
      expect(await dispatch(handlers, m, { surprise: 1 }), m).toMatchObject({
        ok: false,
        error: { code: 'bad-request' },
      });
    }
  });

  it('checks the Weft storage enrolment form', () => {
    const input = api.connectWeft.input;
    const ok = { server: 'http://127.0.0.1:8080', enrolment: { kind: 'invite', invite: 'abc' } };
    expect(input.safeParse(ok).success).toBe(true);
    expect(input.safeParse({ ...ok, server: 'file:///etc/passwd' }).success).toBe(false);
    expect(input.safeParse({ ...ok, server: 'not a url' }).success).toBe(false);
    expect(input.safeParse({ ...ok, enrolment: { kind: 'adminToken', invite: 'abc' } }).success).toBe(false);
    expect(input.safeParse({ ...ok, enrolment: { kind: 'adminToken', adminToken: '' } }).success).toBe(false);
  });
});
