import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import {
  type AppLike,
  applyStartAtLogin,
  gracefulQuit,
  singleInstance,
  withStartAtLogin,
} from '../src/main/app-lifecycle.ts';

class FakeApp extends EventEmitter implements AppLike {
  lock = true;
  quits = 0;
  exits: number[] = [];
  login: { openAtLogin: boolean; openAsHidden?: boolean }[] = [];
  requestSingleInstanceLock(): boolean {
    return this.lock;
  }
  quit(): void {
    this.quits++;
  }
  exit(code: number): void {
    this.exits.push(code);
  }
  setLoginItemSettings(s: { openAtLogin: boolean; openAsHidden?: boolean }): void {
    this.login.push(s);
  }
  /** What Electron does on app.quit(): emit before-quit; true if nobody held it. */
  requestQuit(): boolean {
    let held = false;
    this.emit('before-quit', { preventDefault: () => (held = true) });
    return !held;
  }
}

const tick = (ms = 0): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('single instance', () => {
  it('the first instance keeps running and shows itself when started again', () => {
    const app = new FakeApp();
    let shown = 0;
    expect(singleInstance(app, () => shown++)).toBe(true);
    app.emit('second-instance');
    app.emit('second-instance');
    expect(shown).toBe(2);
    expect(app.quits).toBe(0);
  });

  it('a second instance quits without registering anything', () => {
    const app = new FakeApp();
    app.lock = false;
    expect(singleInstance(app, () => undefined)).toBe(false);
    expect(app.quits).toBe(1);
    expect(app.listenerCount('second-instance')).toBe(0);
  });
});

describe('start at login', () => {
  it('is applied (hidden, in the tray) whenever the setting is saved', async () => {
    const app = new FakeApp();
    applyStartAtLogin(app, false);
    const set = withStartAtLogin(app, async (p: { startAtLogin?: boolean }) => ({
      startAtLogin: p.startAtLogin ?? false,
      other: 1,
    }));
    expect(await set({ startAtLogin: true })).toEqual({ startAtLogin: true, other: 1 });
    await set({});
    expect(app.login).toEqual([
      { openAtLogin: false, openAsHidden: false },
      { openAtLogin: true, openAsHidden: true },
      { openAtLogin: false, openAsHidden: false },
    ]);
  });

  it('is not applied when saving fails', async () => {
    const app = new FakeApp();
    const set = withStartAtLogin(app, async (): Promise<{ startAtLogin: boolean }> => {
      throw new Error('disk full');
    });
    await expect(set({})).rejects.toThrow('disk full');
    expect(app.login).toEqual([]);
  });
});

describe('graceful quit', () => {
  it('holds the quit until the engine has finished its write, then exits 0', async () => {
    const app = new FakeApp();
    const steps: string[] = [];
    let finishWrite!: () => void;
    gracefulQuit(app, {
      beforeStop: () => steps.push('tray gone'),
      stop: () =>
        new Promise<void>((resolve) => {
          steps.push('stopping');
          finishWrite = () => {
            steps.push('write finished');
            resolve();
          };
        }),
    });
    expect(app.requestQuit()).toBe(false);
    expect(app.requestQuit()).toBe(false); // a second Quit while stopping is held too
    await tick();
    expect(app.exits).toEqual([]);
    finishWrite();
    await tick();
    expect(steps).toEqual(['tray gone', 'stopping', 'write finished']);
    expect(app.exits).toEqual([0]);
  });

  it('exits 1 when stopping fails or takes too long', async () => {
    const failing = new FakeApp();
    const errors: unknown[] = [];
    gracefulQuit(failing, { stop: () => Promise.reject(new Error('boom')), onError: (e) => errors.push(e) });
    failing.requestQuit();
    await tick();
    expect(failing.exits).toEqual([1]);
    expect(errors).toHaveLength(1);

    const stuck = new FakeApp();
    gracefulQuit(stuck, { stop: () => new Promise<void>(() => undefined), timeoutMs: 20 });
    stuck.requestQuit();
    await tick(60);
    expect(stuck.exits).toEqual([1]);
  });
});
