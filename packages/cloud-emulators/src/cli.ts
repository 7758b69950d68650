/**
 * weft-emulator <dropbox|gdrive|onedrive> [--port N] [--host H] [--data DIR]
 *               [--tls-cert FILE --tls-key FILE] [--token T]
 *
 * Starts one emulator and prints one JSON line: {"provider","url","accessToken",…}.
 * OneDrive needs TLS: without --tls-cert/--tls-key a throwaway CA and certificate are
 * made with openssl and the CA file is printed (give it to clients as NODE_EXTRA_CA_CERTS).
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { DropboxEmulator } from './dropbox.ts';
import { GDriveEmulator } from './gdrive.ts';
import type { EmulatorServer } from './http.ts';
import { OneDriveEmulator } from './onedrive.ts';
import { createLocalCertificate } from './tls.ts';

async function main(): Promise<void> {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: {
      port: { type: 'string', default: '0' },
      host: { type: 'string', default: '127.0.0.1' },
      data: { type: 'string' },
      token: { type: 'string' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const kind = positionals[0];
  if (values.help || !kind || !['dropbox', 'gdrive', 'onedrive'].includes(kind)) {
    console.error(
      'usage: weft-emulator <dropbox|gdrive|onedrive> [--port N] [--host H] [--data DIR] [--token T] [--tls-cert F --tls-key F]',
    );
    process.exit(values.help ? 0 : 2);
  }
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`bad --port ${values.port}`);
  const common = {
    port,
    host: values.host,
    ...(values.data ? { dataDir: values.data } : {}),
    ...(values.token ? { accessToken: values.token } : {}),
  };
  let tls: { cert: string; key: string } | undefined;
  let caFile: string | undefined;
  if (values['tls-cert'] && values['tls-key']) {
    tls = { cert: readFileSync(values['tls-cert'], 'utf8'), key: readFileSync(values['tls-key'], 'utf8') };
  } else if (kind === 'onedrive') {
    const made = createLocalCertificate();
    tls = { cert: made.cert, key: made.key };
    caFile = made.caFile;
  }
  let emu: EmulatorServer;
  let info: Record<string, unknown>;
  if (kind === 'dropbox') {
    emu = await new DropboxEmulator({ ...common, ...(tls ? { tls } : {}) }).start();
    info = { baseUrl: emu.url };
  } else if (kind === 'gdrive') {
    emu = await new GDriveEmulator({ ...common, ...(tls ? { tls } : {}) }).start();
    info = { rootUrl: emu.url };
  } else {
    const od = await new OneDriveEmulator({ ...common, tls: tls as { cert: string; key: string } }).start();
    emu = od;
    info = { graphOrigin: od.apiOrigin, ...(caFile ? { caFile } : {}) };
  }
  console.log(JSON.stringify({ provider: kind, url: emu.url, accessToken: emu.accessToken, ...info }));
  const stop = (): void => {
    void emu.close().then(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : String(e));
  process.exit(1);
});
