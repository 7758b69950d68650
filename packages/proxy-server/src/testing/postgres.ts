/**
 * A real PostgreSQL for tests and benches, started on demand the way the UI tests start
 * Chromium: the machine's own binaries (`/usr/lib/postgresql/<version>/bin`, Debian's
 * postgresql package; WEFT_PG_BIN names another folder), `initdb` + `pg_ctl` on a temporary
 * directory, listening on 127.0.0.1 at a free port, with fsync off (a test cluster holds
 * nothing worth a disk flush). PostgreSQL refuses to run as root, so as root (CI) the cluster
 * runs as the unprivileged `nobody` (created with useradd when missing) and its directory is
 * owned by it. Each test gets a database of its own (`createDatabase`).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as nodePath from 'node:path';

export interface RunningPostgres {
  readonly host: string;
  readonly port: number;
  /** The URL of database `db` for the superuser `postgres` (trust authentication on loopback). */
  url(db: string): string;
  /** A new, empty database; returns its URL. */
  createDatabase(name?: string): Promise<string>;
  stop(): Promise<void>;
}

const PG_USER = 'nobody';

const ENSURE_SCRIPT = nodePath.resolve(import.meta.dirname, '../../../../scripts/ensure-postgres.sh');
let ensured = false;

/**
 * The folder holding initdb and pg_ctl, or why there is none. The first call installs
 * Debian's package when none is there (scripts/ensure-postgres.sh; as root, as CI runs).
 */
export function postgresBinaries(): { dir: string } | { missing: string } {
  const found = findBinaries();
  if ('dir' in found || process.env.WEFT_PG_BIN || ensured || !fs.existsSync(ENSURE_SCRIPT)) return found;
  ensured = true;
  const r = spawnSync('sh', [ENSURE_SCRIPT], { encoding: 'utf8' });
  if (r.status !== 0)
    return { missing: `${found.missing}; ensure-postgres.sh: ${(r.stderr || '').trim().slice(-300)}` };
  return findBinaries();
}

function findBinaries(): { dir: string } | { missing: string } {
  const env = process.env.WEFT_PG_BIN;
  const candidates = env
    ? [env]
    : (() => {
        const root = '/usr/lib/postgresql';
        try {
          return fs
            .readdirSync(root)
            .filter((v) => /^\d+$/.test(v))
            .sort((a, b) => Number(b) - Number(a))
            .map((v) => nodePath.join(root, v, 'bin'));
        } catch {
          return [];
        }
      })();
  for (const dir of candidates)
    if (fs.existsSync(nodePath.join(dir, 'initdb')) && fs.existsSync(nodePath.join(dir, 'pg_ctl')))
      return { dir };
  return {
    missing: env
      ? `WEFT_PG_BIN=${env} has no initdb and pg_ctl`
      : 'no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (Debian package postgresql)',
  };
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

/** The unprivileged account to run as when we are root (made if missing). */
function runAs(): { uid: number; gid: number; name: string } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string): number =>
    Number(execFileSync('id', [flag, PG_USER], { encoding: 'utf8' }).trim());
  try {
    return { uid: id('-u'), gid: id('-g'), name: PG_USER };
  } catch {
    execFileSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', PG_USER]);
    return { uid: id('-u'), gid: id('-g'), name: PG_USER };
  }
}

function run(bin: string, args: string[], user: { name: string } | undefined): void {
  const [cmd, argv] = user ? ['runuser', ['-u', user.name, '--', bin, ...args]] : [bin, args];
  const r = spawnSync(cmd, argv, { encoding: 'utf8', cwd: os.tmpdir() });
  if (r.status !== 0)
    throw new Error(`${nodePath.basename(bin)} failed (${r.status ?? r.signal}): ${r.stderr || r.stdout}`);
}

/**
 * Start a cluster. `createDatabase` runs `CREATE DATABASE` through `admin`, a function the
 * caller supplies with its client library (this file depends on none).
 */
export async function startPostgres(
  admin: (url: string, sql: string) => Promise<void>,
): Promise<RunningPostgres> {
  const bins = postgresBinaries();
  if ('missing' in bins) throw new Error(bins.missing);
  const user = runAs();
  const dir = fs.mkdtempSync(nodePath.join(os.tmpdir(), 'weft-pg-'));
  const data = nodePath.join(dir, 'data');
  fs.mkdirSync(data, { mode: 0o700 });
  if (user) {
    fs.chmodSync(dir, 0o755);
    fs.chownSync(dir, user.uid, user.gid);
    fs.chownSync(data, user.uid, user.gid);
  }
  const bin = (n: string): string => nodePath.join(bins.dir, n);
  run(
    bin('initdb'),
    ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync'],
    user,
  );
  const port = await freePort();
  const opts = `-p ${port} -h 127.0.0.1 -k ${dir} -F -c max_connections=200 -c synchronous_commit=off`;
  run(
    bin('pg_ctl'),
    ['-D', data, '-o', opts, '-l', nodePath.join(dir, 'log'), '-w', '-t', '60', 'start'],
    user,
  );
  let stopped = false;
  const stopSync = (): void => {
    if (stopped) return;
    stopped = true;
    try {
      run(bin('pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop'], user);
    } catch {
      /* already gone */
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', stopSync);
  const host = '127.0.0.1';
  const url = (db: string): string => `postgres://postgres@${host}:${port}/${db}`;
  let n = 0;
  return {
    host,
    port,
    url,
    async createDatabase(name?: string): Promise<string> {
      const db = name ?? `t_${process.pid}_${++n}_${Math.random().toString(36).slice(2, 8)}`;
      if (!/^[a-z_][a-z0-9_]*$/.test(db)) throw new Error(`database name ${db}: use [a-z0-9_]`);
      await admin(url('postgres'), `CREATE DATABASE ${db}`);
      return url(db);
    },
    async stop(): Promise<void> {
      process.removeListener('exit', stopSync);
      stopSync();
    },
  };
}
