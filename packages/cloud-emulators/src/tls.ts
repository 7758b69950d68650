/**
 * A throwaway certificate authority and a localhost server certificate, made with the
 * openssl CLI at test setup (never committed). The Graph SDK only talks HTTPS, so the
 * OneDrive emulator needs one; clients trust it through NODE_EXTRA_CA_CERTS=<caFile>.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as nodePath from 'node:path';

export interface LocalCertificate {
  readonly dir: string;
  readonly caFile: string;
  readonly certFile: string;
  readonly keyFile: string;
  readonly cert: string;
  readonly key: string;
  readonly ca: string;
}

/** Create a CA and a certificate for localhost and 127.0.0.1 (valid 2 days) in a new temp dir. */
export function createLocalCertificate(
  dir = mkdtempSync(nodePath.join(tmpdir(), 'weft-emulator-tls-')),
): LocalCertificate {
  const f = (n: string): string => nodePath.join(dir, n);
  const ossl = (...args: string[]): void => {
    execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  };
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  ossl(
    'req',
    '-x509',
    ...ec,
    '-keyout',
    f('ca.key'),
    '-out',
    f('ca.pem'),
    '-days',
    '2',
    '-subj',
    '/CN=Weft emulator test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  );
  ossl('req', ...ec, '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=localhost');
  writeFileSync(
    f('server.ext'),
    'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n',
  );
  ossl(
    'x509',
    '-req',
    '-in',
    f('server.csr'),
    '-CA',
    f('ca.pem'),
    '-CAkey',
    f('ca.key'),
    '-CAcreateserial',
    '-out',
    f('server.pem'),
    '-days',
    '2',
    '-extfile',
    f('server.ext'),
  );
  return {
    dir,
    caFile: f('ca.pem'),
    certFile: f('server.pem'),
    keyFile: f('server.key'),
    cert: readFileSync(f('server.pem'), 'utf8'),
    key: readFileSync(f('server.key'), 'utf8'),
    ca: readFileSync(f('ca.pem'), 'utf8'),
  };
}

/**
 * One certificate per process tree: the first caller makes it and records its folder in
 * WEFT_EMULATOR_TLS_DIR; later callers (another test project's setup in the same vitest
 * run) load it, so NODE_EXTRA_CA_CERTS names the one CA every emulator is signed by.
 * `created` tells the caller whether it owns the folder (and should remove it).
 */
export function sharedLocalCertificate(): LocalCertificate & { created: boolean } {
  const dir = process.env.WEFT_EMULATOR_TLS_DIR;
  if (dir) {
    try {
      const f = (n: string): string => nodePath.join(dir, n);
      return {
        dir,
        caFile: f('ca.pem'),
        certFile: f('server.pem'),
        keyFile: f('server.key'),
        cert: readFileSync(f('server.pem'), 'utf8'),
        key: readFileSync(f('server.key'), 'utf8'),
        ca: readFileSync(f('ca.pem'), 'utf8'),
        created: false,
      };
    } catch {
      // Gone or incomplete: make a new one below.
    }
  }
  const made = createLocalCertificate();
  process.env.WEFT_EMULATOR_TLS_DIR = made.dir;
  return { ...made, created: true };
}
