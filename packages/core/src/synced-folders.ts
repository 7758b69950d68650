/**
 * The synced folders of one agent beyond its main folder: each has its own local path, its
 * own journal and trash (`<stateDir>/folders/<id>/`), and its own root on the server,
 * `.weft/folders/<name>` (remote/scoped-store.ts), so that two folders never see each
 * other's files. Two devices that add a folder under the same name sync it together. The
 * list is kept in `<stateDir>/folders.json`; adding a folder starts its engine, removing one
 * stops it and deletes nothing here or on the server (only its journal goes, so that a folder
 * added again later starts from a fresh comparison instead of an old memory of it).
 *
 * Refused, with the reason in words and nothing changed: a path that is not an existing
 * folder, the main folder or one already in the list, a folder inside or around another
 * synced folder, the agent's own state folder (or one inside or around it), and a name
 * already used on this computer or not usable as a folder name on the server.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { z } from 'zod';
import { Engine, type EngineOptions } from './engine.ts';
import { Emitter, type Disposable } from './lifecycle.ts';
import { privateDir, writePrivateFile } from './private-file.ts';
import type { RemoteStore } from './remote/remote-store.ts';
import { folderRoot, scopedRemote } from './remote/scoped-store.ts';
import type { FolderStatus } from './status.ts';

/** The main folder's id (its engine is the agent's own, journal in the state folder itself). */
export const MAIN_FOLDER_ID = 'main';
/** At most this many folders beside the main one. */
export const MAX_EXTRA_FOLDERS = 32;
const FILE = 'folders.json';

const RecordSchema = z.object({
  id: z.string().regex(/^[0-9a-f]{12}$/),
  path: z.string().min(1),
  name: z.string().min(1),
  addedMs: z.number(),
});
export type SyncedFolderRecord = z.infer<typeof RecordSchema>;
const FileSchema = z.object({ version: z.literal(1), folders: z.array(RecordSchema) });

/** A refused add or remove: `message` says why, for the person. */
export class FolderError extends Error {
  override readonly name = 'FolderError';
}

/** One folder as Settings lists it. */
export interface SyncedFolderInfo {
  readonly id: string;
  readonly path: string;
  /** The folder's name on the server ('' for the main folder, which is the whole storage). */
  readonly name: string;
  /** Where its files are on the server ('' = the top of Weft storage). */
  readonly remoteRoot: string;
  readonly primary: boolean;
}

/** What an engine needs beyond its folder, state folder and server view. */
export interface FolderSession {
  readonly client: RemoteStore;
  readonly deviceName: string;
}

export interface SyncedFoldersOptions {
  readonly stateDir: string;
  /** The main folder (its engine is started by the agent). */
  readonly mainFolder: string;
  /** Options every engine gets (ignore patterns, mass-delete limits, watch, settle time). */
  readonly engineOptions: () => Partial<EngineOptions>;
  /** Told when an engine starts (to follow its trash, say); the disposable goes with it. */
  readonly onEngine?: (id: string, engine: Engine, stateDir: string) => Disposable | undefined;
  readonly now?: () => number;
}

/** `~/x` and relative paths as a whole path. */
export function expandPath(input: string): string {
  const t = input.trim();
  if (t === '~' || t.startsWith('~/') || t.startsWith('~\\')) return nodePath.join(os.homedir(), t.slice(1));
  return t;
}

const within = (parent: string, child: string): boolean => {
  const rel = nodePath.relative(parent, child);
  return rel !== '' && !rel.startsWith('..') && !nodePath.isAbsolute(rel);
};

/** Where `p` really is (symbolic links followed as far as they exist). */
async function real(p: string): Promise<string> {
  const abs = nodePath.resolve(p);
  try {
    return await fsp.realpath(abs);
  } catch {
    const parent = nodePath.dirname(abs);
    return parent === abs ? abs : nodePath.join(await real(parent), nodePath.basename(abs));
  }
}

/** Whether `name` can be a folder's name on the server (one path segment). */
export function serverNameProblem(name: string): string | undefined {
  if (name === '' || name.trim() !== name) return 'a name without spaces at either end';
  if (name === '.' || name === '..' || name.startsWith('.weft')) return 'another name';
  if (/[/\\\p{Cc}]/u.test(name)) return 'a name without / \\ or control characters';
  if (Buffer.byteLength(name) > 200) return 'a shorter name';
  return undefined;
}

export class SyncedFolders implements Disposable {
  private records: SyncedFolderRecord[] = [];
  private readonly engines = new Map<string, { engine: Engine; extra: Disposable | undefined }>();
  private session: FolderSession | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly changed = new Emitter<void>();
  private readonly subs = new Map<string, Disposable>();
  /** Why a folder's engine could not start (shown as its error). */
  private readonly failures = new Map<string, string>();

  private constructor(private readonly o: SyncedFoldersOptions) {}

  /** The list saved by an earlier run (none: an empty list). */
  static async load(o: SyncedFoldersOptions): Promise<SyncedFolders> {
    const set = new SyncedFolders(o);
    try {
      const raw: unknown = JSON.parse(await fsp.readFile(nodePath.join(o.stateDir, FILE), 'utf8'));
      set.records = FileSchema.parse(raw).folders;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
        throw new Error(`${nodePath.join(o.stateDir, FILE)} cannot be read: ${(e as Error).message}`);
    }
    return set;
  }

  /** Told when a folder is added or removed, or an engine's status changes. */
  onChange(listener: () => void): Disposable {
    return this.changed.on(listener);
  }

  /** The main folder first, then the others in the order they were added. */
  list(): SyncedFolderInfo[] {
    return [
      { id: MAIN_FOLDER_ID, path: this.o.mainFolder, name: '', remoteRoot: '', primary: true },
      ...this.records.map((r) => ({
        id: r.id,
        path: r.path,
        name: r.name,
        remoteRoot: folderRoot(r.name),
        primary: false,
      })),
    ];
  }

  /** The engine of a folder other than the main one (undefined before enrolment). */
  engine(id: string): Engine | undefined {
    return this.engines.get(id)?.engine;
  }

  /** Every running engine beside the main one, with its folder. */
  running(): { folder: SyncedFolderInfo; engine: Engine }[] {
    return this.list().flatMap((f) => {
      const e = this.engines.get(f.id)?.engine;
      return e ? [{ folder: f, engine: e }] : [];
    });
  }

  /** The folders beside the main one: status (none before enrolment) or why it did not start. */
  statuses(): { folder: SyncedFolderInfo; status: FolderStatus | undefined; failure?: string }[] {
    return this.list()
      .filter((f) => !f.primary)
      .map((f) => {
        const failure = this.failures.get(f.id);
        return {
          folder: f,
          status: this.engines.get(f.id)?.engine.getStatus(),
          ...(failure ? { failure } : {}),
        };
      });
  }

  /** Start every folder's engine with this session (after enrolment). */
  open(session: FolderSession): Promise<void> {
    return this.serial(async () => {
      this.session = session;
      for (const r of this.records) await this.startEngine(r);
    });
  }

  /** Stop every engine (sign-out, agent stop); the list stays. */
  close(): Promise<void> {
    return this.serial(async () => {
      this.session = undefined;
      for (const id of [...this.engines.keys()]) await this.stopEngine(id);
    });
  }

  /**
   * Add a folder (after the checks in the module comment); its engine starts at once when
   * this computer is connected. `name`: its name on the server (default: the folder's own).
   */
  add(input: string, name?: string): Promise<SyncedFolderInfo> {
    return this.serial(async () => {
      const record = await this.check(input, name);
      await privateDir(this.stateOf(record.id));
      this.records = [...this.records, record];
      try {
        await this.save();
      } catch (e) {
        this.records = this.records.filter((r) => r.id !== record.id);
        throw e;
      }
      this.changed.fire();
      if (this.session) await this.startEngine(record);
      const info = this.list().find((f) => f.id === record.id);
      if (!info) throw new Error('added folder vanished');
      return info;
    });
  }

  /** Stop syncing a folder: its engine stops; its files stay, here and on the server. */
  remove(id: string): Promise<void> {
    return this.serial(async () => {
      if (id === MAIN_FOLDER_ID)
        throw new FolderError('The main Weft folder cannot be removed; it is where Weft syncs by default.');
      const record = this.records.find((r) => r.id === id);
      if (!record) throw new FolderError('There is no such synced folder.');
      await this.stopEngine(id);
      this.failures.delete(id);
      this.records = this.records.filter((r) => r.id !== id);
      await this.save();
      // Only the journal goes (what was synced); the folder's trash stays where it was.
      for (const f of ['journal.db', 'journal.db-wal', 'journal.db-shm'])
        await fsp.rm(nodePath.join(this.stateOf(id), f), { force: true });
      this.changed.fire();
    });
  }

  dispose(): void {
    void this.close();
    this.changed.dispose();
  }

  private serial<T>(run: () => Promise<T>): Promise<T> {
    const next = this.queue.then(run, run);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private stateOf(id: string): string {
    return nodePath.join(this.o.stateDir, 'folders', id);
  }

  /** The checks of the module comment; the record to add, or FolderError. */
  private async check(input: string, wanted: string | undefined): Promise<SyncedFolderRecord> {
    const typed = expandPath(input);
    if (typed === '') throw new FolderError('Type the folder’s path.');
    if (!nodePath.isAbsolute(typed))
      throw new FolderError(`Give the folder’s whole path (starting with / or ~): “${input}” is not one.`);
    const st = await fsp.stat(typed).catch(() => undefined);
    if (!st) throw new FolderError(`There is no folder at ${typed}.`);
    if (!st.isDirectory()) throw new FolderError(`${typed} is a file, not a folder.`);
    if (this.records.length >= MAX_EXTRA_FOLDERS)
      throw new FolderError(`Weft syncs at most ${MAX_EXTRA_FOLDERS + 1} folders on one computer.`);
    const path = await real(typed);
    const state = await real(this.o.stateDir);
    if (path === state || within(state, path))
      throw new FolderError(`${typed} is where Weft keeps its own records; it cannot be synced.`);
    if (within(path, state))
      throw new FolderError(
        `${typed} holds the folder where Weft keeps its own records (${this.o.stateDir}).`,
      );
    for (const f of this.list()) {
      const other = await real(f.path);
      const what = f.primary ? 'the main Weft folder' : `the synced folder “${f.name}”`;
      if (other === path) throw new FolderError(`${typed} is already synced (${what}).`);
      if (within(other, path)) throw new FolderError(`${typed} is inside ${what} (${f.path}).`);
      if (within(path, other)) throw new FolderError(`${typed} holds ${what} (${f.path}).`);
    }
    const name = (wanted ?? nodePath.basename(path)).trim();
    const problem = serverNameProblem(name);
    if (problem) throw new FolderError(`“${name}” cannot name a folder in Weft storage; choose ${problem}.`);
    if (this.records.some((r) => r.name.toLowerCase() === name.toLowerCase()))
      throw new FolderError(`A synced folder named “${name}” exists already; choose another name.`);
    return { id: randomBytes(6).toString('hex'), path, name, addedMs: (this.o.now ?? Date.now)() };
  }

  private async save(): Promise<void> {
    await writePrivateFile(
      nodePath.join(this.o.stateDir, FILE),
      JSON.stringify({ version: 1, folders: this.records }, null, 2),
    );
  }

  private async startEngine(r: SyncedFolderRecord): Promise<void> {
    const session = this.session;
    if (!session || this.engines.has(r.id)) return;
    const stateDir = this.stateOf(r.id);
    // A folder gone from its place (a disk not connected, say) is not made again empty: an
    // empty folder would read as every file deleted here. It waits, shown as an error.
    const st = await fsp.stat(r.path).catch(() => undefined);
    if (!st?.isDirectory()) {
      this.failures.set(r.id, `The folder ${r.path} is missing; connect its disk or stop syncing it.`);
      this.changed.fire();
      return;
    }
    let engine: Engine | undefined;
    try {
      // The server root is made by the engine's first listing (scoped-store.ts).
      engine = await Engine.open({
        ...this.o.engineOptions(),
        folder: r.path,
        stateDir,
        client: scopedRemote(session.client, folderRoot(r.name)),
        deviceName: session.deviceName,
      });
      await engine.start();
    } catch (e) {
      // The folder cannot be synced now (its watcher or journal failed, say): the others go on.
      await engine?.stop().catch(() => undefined);
      this.failures.set(r.id, e instanceof Error ? e.message : String(e));
      this.changed.fire();
      return;
    }
    this.failures.delete(r.id);
    this.engines.set(r.id, { engine, extra: this.o.onEngine?.(r.id, engine, stateDir) });
    this.subs.set(
      r.id,
      engine.status.onChange(() => this.changed.fire()),
    );
    this.changed.fire();
  }

  private async stopEngine(id: string): Promise<void> {
    const running = this.engines.get(id);
    if (!running) return;
    this.engines.delete(id);
    this.subs.get(id)?.dispose();
    this.subs.delete(id);
    running.extra?.dispose();
    await running.engine.stop();
    this.changed.fire();
  }
}
