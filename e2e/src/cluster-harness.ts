/**
 * N proxy instances as processes (`weft-proxy --config`, so each can be `kill -9`ed and
 * restarted on its port) against one real PostgreSQL (src/testing/postgres.ts), one object
 * tier on s3proxy and one shared filesystem-tier directory — the production layout of
 * docs/deployment.md on one machine. Each instance reaches PostgreSQL through its own
 * TcpForwarder, so one can be partitioned from the database while the others go on.
 *
 * Each instance appends one JSON line per applied file operation to its own op log (config
 * `opLogFile`), which the ordering checker (op-order.ts) reads merged.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { S3Provider } from '@weft/providers';
import type { S3Endpoint } from '@weft/providers/testing';
import { postgresBinaries, type RunningPostgres, startPostgres } from '@weft/proxy-server/testing/postgres';
import postgres from 'postgres';
import { tempDir } from './harness.ts';
import { adminSql, freePort, startProxyProcess } from './proxy-process.ts';
import { TcpForwarder } from './tcp-forwarder.ts';

/** Why the machine cannot run a cluster (no PostgreSQL server binaries), or undefined. */
export function clusterUnavailable(): string | undefined {
  const bins = postgresBinaries();
  return 'missing' in bins ? bins.missing : undefined;
}

export interface ClusterInstance {
  readonly index: number;
  /** Its `instanceId` (the lease holder and /v1/cluster/instances name it so). */
  readonly id: string;
  readonly url: string;
  /** Its link to PostgreSQL (cut it to partition the instance). */
  readonly link: TcpForwarder;
  readonly opLogFile: string;
  /** The running process, undefined while stopped or killed. */
  readonly child: ChildProcess | undefined;
  /** Started and answering (set once /healthz answered, cleared when it exits). */
  readonly ready: boolean;
  /** The last 20 kB of its output (its log: JSON lines at warn and above), over every start. */
  output(): string;
}

export interface Cluster {
  readonly instances: readonly ClusterInstance[];
  readonly adminToken: string;
  /** The database the instances share (direct, not through any forwarder). */
  readonly databaseUrl: string;
  readonly sharedDir: string;
  /** Key prefix of the object tier on s3proxy. */
  readonly s3Prefix: string;
  /** SQL on the shared database, for checks (never through a forwarder). */
  readonly sql: postgres.Sql;
  /** Start instance i (again) on its port, same id and directories; resolves once /healthz answers. */
  start(i: number): Promise<void>;
  /** `kill -9` of instance i; resolves once it has exited. */
  kill(i: number): Promise<void>;
  /** The instances started and answering. */
  alive(): ClusterInstance[];
  /**
   * The instance holding the controller lease now by the lease row (pg-migrations/004,
   * PostgreSQL's clock), if any.
   */
  controller(): Promise<ClusterInstance | undefined>;
  /** Waits (up to `ms`) for an instance other than `not` to hold the lease. */
  waitController(not?: ClusterInstance, ms?: number): Promise<ClusterInstance>;
  /** Keys under the object tier's prefix (objects/…, signatures/…). */
  objectKeys(): Promise<string[]>;
  stop(): Promise<void>;
}

export interface ClusterOptions {
  readonly instances: number;
  readonly s3: S3Endpoint;
  /** More proxy configuration for every instance. */
  readonly config?: Record<string, unknown>;
}

export async function startCluster(o: ClusterOptions): Promise<Cluster> {
  const pg: RunningPostgres = await startPostgres(adminSql);
  const databaseUrl = await pg.createDatabase();
  const sql = postgres(databaseUrl, { max: 2, onnotice: () => undefined });
  const sharedDir = await tempDir('cluster');
  const adminToken = randomBytes(24).toString('hex');
  const s3Prefix = `cluster-${randomBytes(4).toString('hex')}`;
  const instances: (ClusterInstance & { child: ChildProcess | undefined; ready: boolean; tail: string })[] =
    [];
  for (let i = 0; i < o.instances; i++) {
    const port = await freePort();
    const link = await TcpForwarder.start(pg.host, pg.port);
    const id = `i${i}-${randomBytes(3).toString('hex')}`;
    const inst = {
      index: i,
      id,
      url: `http://127.0.0.1:${port}`,
      link,
      opLogFile: nodePath.join(sharedDir, `ops-${i}.jsonl`),
      child: undefined as ChildProcess | undefined,
      ready: false,
      tail: '',
      output: () => inst.tail,
    };
    const own = nodePath.join(sharedDir, `instance-${i}`);
    await fsp.writeFile(
      nodePath.join(sharedDir, `instance-${i}.json`),
      JSON.stringify({
        host: '127.0.0.1',
        port,
        dataDir: own,
        fsTierDir: nodePath.join(sharedDir, 'fs'),
        databaseUrl: databaseUrl.replace(`:${pg.port}/`, `:${link.port}/`),
        adminToken,
        logLevel: 'warn',
        instanceId: id,
        publicUrl: inst.url,
        opLogFile: inst.opLogFile,
        // Old versions would keep content referenced: the leak check wants the live tree only.
        versions: { retentionDays: 0 },
        shares: { enabled: false },
        objectTier: {
          type: 's3',
          bucket: o.s3.bucket,
          prefix: s3Prefix,
          endpoint: o.s3.endpoint,
          region: o.s3.region,
          forcePathStyle: true,
          accessKeyId: o.s3.accessKeyId,
          secretAccessKey: o.s3.secretAccessKey,
        },
        ...o.config,
      }),
    );
    instances.push(inst);
  }

  const start = async (i: number): Promise<void> => {
    const inst = instances[i];
    if (!inst) throw new Error(`no instance ${i}`);
    if (inst.child) throw new Error(`instance ${i} is running`);
    const keep = (text: string): void => void (inst.tail = (inst.tail + text).slice(-20_000));
    await startProxyProcess(nodePath.join(sharedDir, `instance-${i}.json`), inst.url, {
      name: `instance ${i}`,
      onOutput: keep,
      onSpawn: (child) => {
        inst.child = child;
        child.once('exit', () => {
          if (inst.child !== child) return;
          inst.child = undefined;
          inst.ready = false;
        });
      },
    });
    inst.ready = true;
  };

  const kill = async (i: number): Promise<void> => {
    const child = instances[i]?.child;
    if (!child) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  };

  const objects = new S3Provider({
    bucket: o.s3.bucket,
    prefix: s3Prefix,
    endpoint: o.s3.endpoint,
    region: o.s3.region,
    forcePathStyle: true,
    credentials: { accessKeyId: o.s3.accessKeyId, secretAccessKey: o.s3.secretAccessKey },
  });

  const cluster: Cluster = {
    instances,
    adminToken,
    databaseUrl,
    sharedDir,
    s3Prefix,
    sql,
    start,
    kill,
    alive: () => instances.filter((x) => x.ready),
    async controller() {
      const rows = await sql<{ holder: string }[]>`
        SELECT holder FROM cluster_lease
        WHERE name = 'controller' AND holder IS NOT NULL
          AND expires_ms > (extract(epoch FROM clock_timestamp()) * 1000)::bigint`.catch(() => []);
      return instances.find((x) => x.id === rows[0]?.holder);
    },
    async waitController(not, ms = 30_000) {
      const until = Date.now() + ms;
      for (;;) {
        const c = await cluster.controller();
        if (c && c !== not) return c;
        if (Date.now() > until)
          throw new Error(`no instance${not ? ` but ${not.id}` : ''} took the controller lease in ${ms} ms`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async objectKeys() {
      const out: string[] = [];
      for (const top of ['objects', 'signatures']) {
        try {
          for await (const e of objects.list(top, { recursive: true }))
            if (e.kind === 'file') out.push(e.path);
        } catch (e) {
          if ((e as Error).name !== 'NotFoundError') throw e;
        }
      }
      return out.sort();
    },
    async stop() {
      await Promise.all(instances.map((_, i) => kill(i)));
      for (const x of instances) await x.link.close();
      await sql.end({ timeout: 1 });
      await pg.stop();
      await fsp.rm(sharedDir, { recursive: true, force: true });
    },
  };
  try {
    // One at a time: the first applies the schema's migrations.
    await start(0);
    await Promise.all(instances.slice(1).map((_, k) => start(k + 1)));
  } catch (e) {
    await cluster.stop();
    throw e;
  }
  return cluster;
}
