import { spawnSync } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { EXIT_BROKEN, installProcessGuard } from '../src/process-guard.ts';

const FIXTURE = fileURLToPath(new URL('./fixtures/guarded-process.mjs', import.meta.url));
const run = (mode: string) =>
  spawnSync(process.execPath, [FIXTURE, mode], { encoding: 'utf8', timeout: 60_000 });

describe('process guard', { timeout: 60_000 }, () => {
  it('without it, one unhandled rejection ends a Node process (what ended the agent)', () => {
    const r = run('unguarded');
    expect(r.status).not.toBe(0);
    expect(r.stdout).not.toContain('still alive');
  });

  it('logs an unhandled rejection with its stack and keeps the process up', () => {
    const r = run('reject');
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('still alive');
    expect(r.stderr).toContain('unhandled promise rejection (kept running): Error: block upload failed');
    expect(r.stderr).toMatch(/guarded-process\.mjs:\d+/);
  });

  it('logs an uncaught exception and keeps the process up', () => {
    const r = run('throw-once');
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('still alive');
    expect(r.stderr).toContain('uncaught exception (kept running): Error: boom');
  });

  it('exits, saying why, when errors keep coming (a broken state does not loop silently)', () => {
    const r = run('throw-forever');
    expect(r.status).toBe(EXIT_BROKEN);
    expect(r.stderr).toContain('broken state; exiting with code 70');
    expect(r.stderr.match(/kept running/g)).toHaveLength(4);
  });

  it('counts faults in a sliding window and stops listening when disposed', () => {
    const target = new EventEmitter();
    let t = 0;
    const exits: number[] = [];
    const lines: string[] = [];
    const guard = installProcessGuard({
      target,
      log: (l) => void lines.push(l),
      exit: (c) => void exits.push(c),
      now: () => t,
      maxFaults: 2,
      windowMs: 1000,
    });
    for (let i = 0; i < 6; i++) {
      target.emit('unhandledRejection', new Error(`r${i}`));
      t += 600; // never more than two within a second
    }
    expect(exits).toEqual([]);
    expect(guard.faults).toBe(6);
    target.emit('uncaughtException', new Error('a'));
    target.emit('uncaughtException', new Error('b'));
    expect(exits).toEqual([EXIT_BROKEN]);
    target.emit('uncaughtException', 'not an error');
    expect(exits).toEqual([EXIT_BROKEN]); // said once
    expect(lines.at(-1)).toContain('non-error value: not an error');
    guard.dispose();
    expect(target.listenerCount('unhandledRejection') + target.listenerCount('uncaughtException')).toBe(0);
  });
});
