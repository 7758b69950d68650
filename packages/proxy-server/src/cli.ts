/**
 * `weft-proxy [--config FILE]`: start the proxy from a JSON config file plus WEFT_PROXY_*
 * environment overrides (see config.ts); with no file, embedded defaults.
 * `weft-proxy cluster --instances N [--max M] ...`: run and scale several (cluster/supervisor.ts).
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { ConfigError, ENV_OVERRIDES, loadConfigFile, parseConfig } from './config.ts';
import { ADMIN_VERBS, type AdminVerb, clusterAdminCommand } from './cluster/admin-cli.ts';
import { ClusterSupervisor } from './cluster/supervisor.ts';
import { startProxyServer } from './server.ts';

const HELP = `usage: weft-proxy [--config FILE]
       weft-proxy cluster --instances N [--max M] [--ports FROM-TO] [--on-scale CMD] [--external] [--config FILE]
       weft-proxy cluster drain|activate ID --server URL   (admin token in WEFT_PROXY_ADMIN_TOKEN)

Starts the Weft proxy server. Settings come from FILE (JSON, see docs/proxy-server.md)
and are overridden by environment variables:
  ${Object.keys(ENV_OVERRIDES).join('\n  ')}

cluster: runs N instances of this config (it needs databaseUrl) as child processes, starts
another (up to M, default N + 2) when every instance is congested and drains one (down to N)
when all are idle (cluster.thetaCongested / thetaIdle, docs/deployment.md); restarts a child
that crashes. --on-scale CMD (or cluster.onScale) runs on each change with WEFT_SCALE=up|down;
--external runs no child and leaves starting and stopping instances to that command.

cluster drain ID: instance ID (any live one; --server is any instance) takes no new transfers
and finishes the ones it has; cluster activate ID undoes it.
`;

async function cluster(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      config: { type: 'string', short: 'c' },
      instances: { type: 'string', short: 'n' },
      max: { type: 'string' },
      ports: { type: 'string' },
      'on-scale': { type: 'string' },
      external: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(HELP);
    return;
  }
  const int = (name: string, v: string | undefined): number | undefined => {
    if (v === undefined) return undefined;
    if (!/^\d+$/.test(v)) throw new ConfigError(`--${name} ${v}: a whole number`);
    return Number(v);
  };
  const n = int('instances', values.instances);
  if (n === undefined) throw new ConfigError('cluster: give --instances N');
  const max = int('max', values.max) ?? n + 2;
  let ports: { from: number; to: number } | undefined;
  if (values.ports !== undefined) {
    const m = /^(\d+)-(\d+)$/.exec(values.ports);
    if (!m || Number(m[1]) < 1 || Number(m[2]) > 65535 || Number(m[1]) > Number(m[2]))
      throw new ConfigError(`--ports ${values.ports}: FROM-TO, e.g. 8081-8089`);
    ports = { from: Number(m[1]), to: Number(m[2]) };
  }
  const config = values.config ? loadConfigFile(values.config) : parseConfig({}, process.env);
  if (values['on-scale']) config.cluster.onScale = values['on-scale'];
  const log = pino({ level: config.logLevel, name: 'weft-proxy-cluster' });
  // Every instance must accept the same admin token: one for the run when none is configured.
  const env: NodeJS.ProcessEnv = {};
  if (!config.adminToken && !config.adminTokenSha256) {
    env.WEFT_PROXY_ADMIN_TOKEN = 'wfa_' + randomBytes(24).toString('base64url');
    process.stderr.write(`weft-proxy cluster: admin token for this run: ${env.WEFT_PROXY_ADMIN_TOKEN}\n`);
  }
  let supervisor: ClusterSupervisor;
  try {
    supervisor = new ClusterSupervisor({
      config,
      ...(values.config ? { configFile: values.config } : {}),
      instances: n,
      max,
      ...(ports ? { ports } : {}),
      external: values.external ?? false,
      log,
      say: (line) => process.stdout.write(line + '\n'),
      env,
    });
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
  supervisor.start();
  const stop = (signal: string): void => {
    log.info({ signal }, 'stopping the cluster');
    supervisor.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'cluster shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
}

async function main(): Promise<void> {
  const verb = process.argv[3] as AdminVerb;
  if (process.argv[2] === 'cluster' && ADMIN_VERBS.includes(verb)) {
    process.stdout.write((await clusterAdminCommand(verb, process.argv.slice(4), process.env)) + '\n');
    return;
  }
  if (process.argv[2] === 'cluster') return cluster(process.argv.slice(3));
  const { values } = parseArgs({
    options: { config: { type: 'string', short: 'c' }, help: { type: 'boolean', short: 'h' } },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(HELP);
    return;
  }
  const config = values.config ? loadConfigFile(values.config) : parseConfig({}, process.env);
  const log = pino({ level: config.logLevel, name: 'weft-proxy' });
  const server = await startProxyServer(config, { logger: log });
  if (!config.adminToken && !config.adminTokenSha256) {
    // Generated for this run: shown once on the terminal of whoever started the server (not
    // written to the log). A server given only the token's hash has none to show.
    process.stderr.write(`weft-proxy: admin token for this run: ${server.adminToken}\n`);
  }
  process.stdout.write(`weft-proxy listening on ${server.url}\n`);
  const stop = (signal: string): void => {
    log.info({ signal }, 'shutting down');
    server.close().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
}

main().catch((err: unknown) => {
  process.stderr.write(
    `weft-proxy: ${err instanceof ConfigError ? err.message : String((err as Error).stack ?? err)}\n`,
  );
  process.exit(1);
});
