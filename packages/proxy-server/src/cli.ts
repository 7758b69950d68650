/**
 * `weft-proxy [--config FILE]`: start the proxy from a JSON config file plus WEFT_PROXY_*
 * environment overrides (see config.ts); with no file, embedded defaults.
 */
import { parseArgs } from 'node:util';
import pino from 'pino';
import { ConfigError, ENV_OVERRIDES, loadConfigFile, parseConfig } from './config.ts';
import { startProxyServer } from './server.ts';

const HELP = `usage: weft-proxy [--config FILE]

Starts the Weft proxy server. Settings come from FILE (JSON, see docs/proxy-server.md)
and are overridden by environment variables:
  ${Object.keys(ENV_OVERRIDES).join('\n  ')}
`;

async function main(): Promise<void> {
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
