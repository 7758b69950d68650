/**
 * `weft-proxy cluster` (cli.ts): runs N proxy instances on this machine as child processes
 * sharing one config (its `databaseUrl`, filesystem and object tiers), and adds or retires
 * instances by load (scale.ts, HyCloud Eq. 7–8): it reads every instance's heartbeat row
 * (registry.ts) each `cluster.heartbeatMs`, starts another instance when all are congested
 * for `cluster.sustainMs`, and retires one lazily when all are idle — marks it draining (no
 * new transfers are steered to it), waits for its transfers to end (at most
 * `cluster.drainTimeoutMs`), then stops it. A child that exits on its own is started again
 * (same id and port) after a back-off. `cluster.onScale`, when set, runs on every change:
 * WEFT_SCALE=up|down, WEFT_SCALE_INSTANCE, WEFT_SCALE_URL, WEFT_SCALE_COUNT in its environment.
 * With `external`, no child is run here: the supervisor only decides, marks instances
 * draining, and leaves starting and stopping machines to that command (a deployment that is
 * not one machine).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import * as nodePath from 'node:path';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';
import type { ProxyConfig } from '../config.ts';
import { connect, type Sql } from '../store/postgres-db.ts';
import { type InstanceRow, liveInstances, markDraining } from './registry.ts';
import { decideScale, type ScaleMemory, type ScaleParams } from './scale.ts';

export interface SupervisorOptions {
  config: ProxyConfig;
  /** Given to every child as --config (else the children read the same environment). */
  configFile?: string;
  /** Instances to keep at least (N). */
  instances: number;
  /** Instances to run at most (M ≥ N). */
  max: number;
  /** Ports for the children, inclusive; undefined = each picks a free one (port 0). */
  ports?: { from: number; to: number };
  external?: boolean;
  log: Logger;
  /** Lines for the operator (stdout). */
  say: (line: string) => void;
  /** What starts one instance; default this package's bin/weft-proxy.mjs under this Node. */
  command?: readonly string[];
  /** Extra environment for the children (the admin token when the config has none). */
  env?: NodeJS.ProcessEnv;
}

interface Child {
  id: string;
  port: number;
  proc?: ChildProcess;
  url?: string;
  /** 'restarting': crashed, started again after a back-off (it still counts as one of ours). */
  state: 'running' | 'restarting' | 'draining' | 'stopping';
  startedAt: number;
  drainingSince?: number;
  crashes: number;
}

const BIN = nodePath.resolve(import.meta.dirname, '../../bin/weft-proxy.mjs');

export class ClusterSupervisor {
  private readonly sql: Sql;
  private readonly children = new Map<string, Child>();
  /** External mode: instances marked draining here, and since when. */
  private readonly draining = new Map<string, number>();
  private memory: ScaleMemory = {};
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private stopped = false;
  private serial = 0;
  private readonly prefix = `i${randomBytes(3).toString('hex')}`;
  private readonly params: ScaleParams;

  constructor(private readonly o: SupervisorOptions) {
    if (!o.config.databaseUrl)
      throw new Error('weft-proxy cluster needs databaseUrl (PostgreSQL): instances share their metadata');
    if (o.config.publicUrl && !o.external)
      throw new Error('publicUrl names one instance: leave it out of the config of weft-proxy cluster');
    if (!(o.instances >= 1 && o.max >= o.instances))
      throw new Error(`--instances ${o.instances} --max ${o.max}: need 1 ≤ instances ≤ max`);
    if (o.ports && o.ports.to - o.ports.from + 1 < o.max)
      throw new Error(`ports ${o.ports.from}-${o.ports.to} are fewer than --max ${o.max}`);
    const c = o.config.cluster;
    this.params = {
      thetaCongested: c.thetaCongested,
      thetaIdle: c.thetaIdle,
      sustainMs: c.sustainMs,
      cooldownMs: c.cooldownMs,
      min: o.instances,
      max: o.max,
    };
    this.sql = connect(o.config.databaseUrl, 2);
  }

  /** Start the N instances and the scaling loop. */
  start(): void {
    if (!this.o.external) for (let i = 0; i < this.o.instances; i++) this.spawnChild(this.newId());
    // The first decision waits a cooldown: the instances are starting.
    this.memory = { lastActionMs: Date.now() };
    this.timer = setInterval(() => {
      this.ticking ??= this.tick()
        .catch((err: unknown) => this.o.log.warn({ err }, 'cluster: supervisor tick failed'))
        .finally(() => (this.ticking = undefined));
    }, this.o.config.cluster.heartbeatMs);
  }

  /** The children running now (id → url), for tests and the operator. */
  running(): { id: string; url?: string; state: string }[] {
    return [...this.children.values()].map((c) => ({
      id: c.id,
      ...(c.url ? { url: c.url } : {}),
      state: c.state,
    }));
  }

  async tick(): Promise<void> {
    const now = Date.now();
    const rows = await liveInstances(this.sql, this.o.config.cluster.aliveMs);
    const byId = new Map(rows.map((r) => [r.id, r]));
    await this.finishDrains(byId, now);
    let readings: InstanceRow[];
    if (this.o.external) readings = rows;
    else {
      const mine = [...this.children.values()].filter(
        (c) => c.state === 'running' || c.state === 'restarting',
      );
      // Decide on figures from every instance this runs: none is still starting or restarting.
      if (mine.some((c) => c.state !== 'running' || !c.url || !byId.has(c.id))) return;
      readings = mine.map((c) => byId.get(c.id)!);
    }
    const { decision, memory } = decideScale(readings, this.memory, now, this.params);
    this.memory = memory;
    if (decision.action === 'add') {
      if (this.o.external) {
        this.say(`adding an instance: ${decision.reason}`);
        this.hook('up', undefined, readings.filter((r) => r.state === 'active').length + 1);
      } else {
        const id = this.newId();
        if (this.freePort() === undefined) {
          this.say(`cannot add an instance: every port of the range is taken`);
          return;
        }
        this.say(`adding ${id}: ${decision.reason}`);
        this.spawnChild(id);
        this.hook('up', { id }, this.activeCount());
      }
    } else if (decision.action === 'drain') {
      this.say(`draining ${decision.id}: ${decision.reason}`);
      await markDraining(this.sql, decision.id);
      const child = this.children.get(decision.id);
      if (child) {
        child.state = 'draining';
        child.drainingSince = now;
      } else this.draining.set(decision.id, now);
    }
  }

  /** Stop the draining instances whose transfers ended (or that drained too long). */
  private async finishDrains(rows: Map<string, InstanceRow>, now: number): Promise<void> {
    const limit = this.o.config.cluster.drainTimeoutMs;
    const done = (id: string, since: number): boolean => {
      const r = rows.get(id);
      return !r || (r.state === 'draining' && r.activeTransfers === 0) || now - since >= limit;
    };
    // An operator who activated an instance again (POST …/activate) keeps it.
    const activated = (id: string): boolean => rows.get(id)?.state === 'active';
    for (const c of this.children.values()) {
      if (c.state === 'draining' && activated(c.id)) {
        c.state = 'running';
        delete c.drainingSince;
        this.say(`${c.id} was activated again: kept`);
        continue;
      }
      if (c.state !== 'draining' || !done(c.id, c.drainingSince ?? now)) continue;
      this.say(`stopping ${c.id}: drained`);
      await this.stopChild(c);
      this.hook('down', c, this.activeCount());
    }
    for (const [id, since] of this.draining) {
      if (activated(id)) {
        this.draining.delete(id);
        this.say(`${id} was activated again: kept`);
        continue;
      }
      if (!done(id, since)) continue;
      this.draining.delete(id);
      this.say(`${id} drained: the operator hook stops it`);
      const url = rows.get(id)?.url;
      this.hook('down', { id, ...(url ? { url } : {}) }, rows.size - 1);
    }
  }

  private activeCount(): number {
    return [...this.children.values()].filter((c) => c.state === 'running' || c.state === 'restarting')
      .length;
  }

  private newId(): string {
    return `${this.prefix}-${++this.serial}`;
  }

  private freePort(): number | undefined {
    const r = this.o.ports;
    if (!r) return 0;
    const used = new Set([...this.children.values()].map((c) => c.port));
    for (let p = r.from; p <= r.to; p++) if (!used.has(p)) return p;
    return undefined;
  }

  private spawnChild(id: string, port = this.freePort() ?? 0, crashes = 0): void {
    const child: Child = { id, port, state: 'running', startedAt: Date.now(), crashes };
    this.children.set(id, child);
    const instancesDir = nodePath.join(this.o.config.dataDir, 'instances');
    mkdirSync(instancesDir, { recursive: true, mode: 0o700 });
    const [cmd, ...args] = this.o.command ?? [process.execPath, BIN];
    const proc = spawn(cmd!, [...args, ...(this.o.configFile ? ['--config', this.o.configFile] : [])], {
      env: {
        ...process.env,
        ...this.o.env,
        WEFT_PROXY_INSTANCE_ID: id,
        WEFT_PROXY_PORT: String(port),
        // The SQLite file keeps per-process tables (cost ledger): one per instance.
        WEFT_PROXY_METADATA_FILE: nodePath.join(instancesDir, `${id}.sqlite`),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.proc = proc;
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      const m = /^weft-proxy listening on (\S+)/.exec(line);
      if (m) {
        child.url = m[1];
        this.say(`started ${id} (pid ${proc.pid}) on ${child.url}`);
      } else process.stdout.write(`[${id}] ${line}\n`);
    });
    createInterface({ input: proc.stderr! }).on('line', (line) => process.stderr.write(`[${id}] ${line}\n`));
    proc.once('exit', (code, signal) => {
      if (child.state === 'stopping' || this.stopped) return;
      if (child.state === 'draining') {
        this.children.delete(id);
        this.say(`${id} exited while draining (${signal ?? code})`);
        return;
      }
      child.state = 'restarting';
      delete child.url;
      // Crashed: start it again, the same id and port, backing off if it keeps crashing.
      const quick = Date.now() - child.startedAt < 30_000;
      const n = quick ? child.crashes + 1 : 1;
      const delay = Math.min(30_000, 1000 * 2 ** (n - 1));
      this.say(`${id} exited (${signal ?? code}): restarting in ${delay} ms`);
      setTimeout(() => {
        if (!this.stopped && this.children.get(id)?.state === 'restarting') this.spawnChild(id, port, n);
      }, delay).unref();
    });
  }

  private async stopChild(c: Child): Promise<void> {
    c.state = 'stopping';
    const proc = c.proc;
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise<void>((r) => proc.once('exit', () => r()));
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(t);
    }
    this.children.delete(c.id);
    this.say(`stopped ${c.id}`);
  }

  private hook(
    direction: 'up' | 'down',
    instance: { id: string; url?: string } | undefined,
    count: number,
  ): void {
    const cmd = this.o.config.cluster.onScale;
    if (!cmd) return;
    const proc = spawn('sh', ['-c', cmd], {
      env: {
        ...process.env,
        WEFT_SCALE: direction,
        WEFT_SCALE_COUNT: String(count),
        ...(instance ? { WEFT_SCALE_INSTANCE: instance.id } : {}),
        ...(instance?.url ? { WEFT_SCALE_URL: instance.url } : {}),
      },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    proc.once('exit', (code) => {
      if (code !== 0) this.say(`onScale (${direction}) exited with ${code}`);
    });
  }

  private say(line: string): void {
    this.o.say(`cluster: ${line}`);
  }

  /** Stop every child and the loop. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.ticking;
    await Promise.all([...this.children.values()].map((c) => this.stopChild(c)));
    await this.sql.end();
  }
}
