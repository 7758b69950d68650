/**
 * The engine harness (Nextcloud's FakeFolder, syncenginetestutils.h, is the model): several
 * devices — each a real Engine on its own temp folder with its real SQLite journal — and one
 * in-memory server (MemoryServer) in one process. Tests script local edits on each device,
 * remote edits through any device, offline periods, and then check convergence: every
 * device holds what the server holds, and nothing a device had not yet synced is lost.
 *
 * Engines run with `watch: false`, `liveFeed: false` and `settleMs: 0`: a pass happens only
 * when the test says `sync`, so one schedule is one history, replayable from its seed.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { Engine, type EngineOptions } from '../../src/engine.ts';
import { MemoryRemoteStore, MemoryServer, type MemoryServerOptions } from '../../src/testing.ts';

const USER = 'alice';

export class FakeDevice {
  constructor(
    readonly name: string,
    readonly folder: string,
    readonly stateDir: string,
    public engine: Engine,
    readonly remote: MemoryRemoteStore,
    private readonly options: Partial<EngineOptions>,
  ) {}

  abs(p: string): string {
    return nodePath.join(this.folder, ...p.split('/'));
  }

  async write(p: string, content: string | Uint8Array): Promise<void> {
    await fsp.mkdir(nodePath.dirname(this.abs(p)), { recursive: true });
    await fsp.writeFile(this.abs(p), content);
  }

  async read(p: string): Promise<string> {
    return fsp.readFile(this.abs(p), 'utf8');
  }

  async exists(p: string): Promise<boolean> {
    return fsp
      .lstat(this.abs(p))
      .then(() => true)
      .catch(() => false);
  }

  async mkdir(p: string): Promise<void> {
    await fsp.mkdir(this.abs(p), { recursive: true });
  }

  async rm(p: string): Promise<void> {
    await fsp.rm(this.abs(p), { recursive: true, force: true });
  }

  async mv(from: string, to: string): Promise<void> {
    await fsp.mkdir(nodePath.dirname(this.abs(to)), { recursive: true });
    await fsp.rename(this.abs(from), this.abs(to));
  }

  /** One sync pass (and whatever it asks to run again). */
  sync(): Promise<void> {
    return this.engine.syncNow();
  }

  set offline(down: boolean) {
    this.remote.offline = down;
  }

  get offline(): boolean {
    return this.remote.offline;
  }

  /** path → sha256 for files, 'dir' for folders. */
  tree(): Promise<Map<string, string>> {
    return localTree(this.folder);
  }

  /** path → 'file' or 'dir' (no contents read: cheap enough to call before every edit). */
  kinds(): Promise<Map<string, string>> {
    return localTree(this.folder, false);
  }

  /**
   * Stop the engine and open a new one on the same folder and journal (an agent restart);
   * `whileDown` runs in between (changes elsewhere, or the journal edited as a crash leaves it).
   */
  async restart(extra: Partial<EngineOptions> = {}, whileDown?: () => Promise<void>): Promise<void> {
    await this.engine.stop();
    await whileDown?.();
    this.engine = await openEngine(this.folder, this.stateDir, this.remote, this.name, {
      ...this.options,
      ...extra,
    });
  }
}

async function openEngine(
  folder: string,
  stateDir: string,
  client: MemoryRemoteStore,
  name: string,
  options: Partial<EngineOptions>,
): Promise<Engine> {
  const engine = await Engine.open({
    folder,
    stateDir,
    client,
    deviceName: name,
    watch: false,
    liveFeed: false,
    settleMs: 0,
    // Offline passes throw; no background retry timer races the schedule.
    offlineRetryMs: 3_600_000,
    caseInsensitive: false,
    ...options,
  });
  await engine.start();
  return engine;
}

export class FakeCloud {
  readonly server: MemoryServer;
  readonly devices: FakeDevice[] = [];
  private readonly root: Promise<string>;

  /**
   * One clock for the server and every device, a second further at each reading: conflict
   * names (which carry the second) are then the same on every run of a schedule. It starts
   * a day ahead of the real time, so files just written never look newer than "now".
   */
  readonly now: () => number;

  constructor(options: MemoryServerOptions = {}) {
    let ticks = 0;
    const start = Math.floor(Date.now() / 1000) * 1000 + 86_400_000;
    this.now = options.now ?? (() => start + 1000 * ticks++);
    this.server = new MemoryServer({ ...options, now: this.now });
    this.root = fsp.mkdtemp(nodePath.join(scratchDir(), 'weft-fake-'));
  }

  async addDevice(name: string, options: Partial<EngineOptions> = {}): Promise<FakeDevice> {
    const dir = nodePath.join(await this.root, name);
    const folder = nodePath.join(dir, 'Weft');
    const stateDir = nodePath.join(dir, 'state');
    const remote = this.server.connect(USER, name);
    const engine = await openEngine(folder, stateDir, remote, name, { now: this.now, ...options });
    const d = new FakeDevice(name, folder, stateDir, engine, remote, { now: this.now, ...options });
    this.devices.push(d);
    return d;
  }

  /** What the server holds: path → sha256 or 'dir'. */
  serverTree(): Map<string, string> {
    return this.server.tree(USER);
  }

  /** The namespace's sequence (moves on with every change the server records). */
  get seq(): number {
    return this.server.seq(USER);
  }

  /**
   * Sync every online device, round after round, until a round changes nothing on the
   * server and no queue holds anything; bounded (a schedule that never settles fails the
   * convergence check that follows).
   */
  async settle(rounds = 12): Promise<void> {
    const online = this.devices.filter((d) => !d.offline);
    for (let i = 0; i < rounds; i++) {
      const before = this.seq;
      for (const d of online) await d.sync();
      const pending = online.reduce((n, d) => n + d.engine.journal.pendingOps().length, 0);
      if (this.seq === before && pending === 0) return;
    }
  }

  async close(): Promise<void> {
    for (const d of this.devices.splice(0)) await d.engine.stop();
    await fsp.rm(await this.root, { recursive: true, force: true });
  }
}

/**
 * Where device folders go: memory-backed /dev/shm when the system has one (every engine
 * write is fsynced; on a disk that is most of a schedule's time), else the temp folder.
 */
function scratchDir(): string {
  if (process.env.WEFT_FAKE_DIR) return process.env.WEFT_FAKE_DIR;
  return process.platform === 'linux' && existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir();
}

/**
 * Contents a device holds that differ from its synced base (path → sha256): they must
 * survive. A content this device synced under another name is not new (a rename not
 * scanned yet): the server had it, and an edit of it elsewhere may rightly replace it.
 */
export async function unsyncedContents(d: FakeDevice): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const synced = new Set(d.engine.journal.allFiles().map((r) => r.syncedHash));
  for (const [p, h] of await d.tree()) {
    if (h === 'dir') continue;
    if (d.engine.journal.getFile(p)?.syncedHash !== h && !synced.has(h)) out.set(p, h);
  }
  return out;
}

/** path → sha256 for files, 'dir' for folders, of a local folder (engine temp files excluded). */
export async function localTree(root: string, hash = true): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const walk = async (dir: string, rel: string): Promise<void> => {
    const entries = await fsp.readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const e of entries) {
      if (e.name.startsWith('.weft-partial-')) continue;
      const p = rel ? `${rel}/${e.name}` : e.name;
      const abs = nodePath.join(dir, e.name);
      if (e.isDirectory()) {
        out.set(p, 'dir');
        await walk(abs, p);
      } else if (e.isFile()) {
        out.set(
          p,
          hash
            ? createHash('sha256')
                .update(await fsp.readFile(abs))
                .digest('hex')
            : 'file',
        );
      }
    }
  };
  await walk(root, '');
  return out;
}

export function sorted(m: Map<string, string>): [string, string][] {
  return [...m.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1));
}

export function sha256(s: string | Uint8Array): string {
  return createHash('sha256').update(s).digest('hex');
}

/** mulberry32: a small deterministic PRNG. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
