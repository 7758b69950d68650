/**
 * The Electron app's lifecycle rules as plain functions over the few `app` methods they
 * use, so they are unit-tested without the Electron binary: one instance only, start at
 * login, and a quit that waits for the engine to finish its current write.
 */
export interface AppLike {
  requestSingleInstanceLock(): boolean;
  quit(): void;
  exit(code: number): void;
  setLoginItemSettings(settings: { openAtLogin: boolean; openAsHidden?: boolean }): void;
  on(event: 'second-instance', listener: () => void): unknown;
  on(event: 'before-quit', listener: (e: { preventDefault(): void }) => void): unknown;
}

/**
 * Take the single-instance lock. The first instance gets true and `onSecond` runs whenever
 * another start is attempted (show the window); a second instance gets false and quits.
 */
export function singleInstance(app: AppLike, onSecond: () => void): boolean {
  if (!app.requestSingleInstanceLock()) {
    app.quit();
    return false;
  }
  app.on('second-instance', onSecond);
  return true;
}

/** Start at login as the settings say (hidden: the app lives in the tray). */
export function applyStartAtLogin(app: AppLike, enabled: boolean): void {
  app.setLoginItemSettings({ openAtLogin: enabled, openAsHidden: enabled });
}

/** Wrap the settings handler so that saving "start at login" also applies it. */
export function withStartAtLogin<P, S extends { startAtLogin: boolean }>(
  app: AppLike,
  setSettings: (patch: P) => Promise<S>,
): (patch: P) => Promise<S> {
  return async (patch) => {
    const saved = await setSettings(patch);
    applyStartAtLogin(app, saved.startAtLogin);
    return saved;
  };
}

export interface GracefulQuitOptions {
  /** Synchronous clean-up first (tray, IPC handlers, subscriptions). */
  readonly beforeStop?: () => void;
  /** Stops the agent; resolves once the engine has finished its current write. */
  readonly stop: () => Promise<void>;
  /** Give up waiting after this long (exit code 1). Default 60 s. */
  readonly timeoutMs?: number;
  readonly onError?: (e: unknown) => void;
}

/**
 * The first quit request is held (preventDefault) until `stop()` resolves, then the app
 * exits 0; later requests while stopping are held too. If stopping fails or outlasts the
 * timeout, the app exits 1 (the journal resumes an interrupted change at the next start).
 */
export function gracefulQuit(app: AppLike, options: GracefulQuitOptions): void {
  let stopping = false;
  app.on('before-quit', (e) => {
    e.preventDefault();
    if (stopping) return;
    stopping = true;
    options.beforeStop?.();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<number>((resolve) => {
      timer = setTimeout(() => resolve(1), options.timeoutMs ?? 60_000);
    });
    const stopped = options.stop().then(
      () => 0,
      (err: unknown) => {
        options.onError?.(err);
        return 1;
      },
    );
    void Promise.race([stopped, timedOut]).then((code) => {
      clearTimeout(timer);
      app.exit(code);
    });
  });
}
