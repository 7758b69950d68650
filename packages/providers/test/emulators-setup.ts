/**
 * For the cloud-emulator tests: a throwaway CA and localhost certificate (openssl, at
 * setup time, never committed) for the HTTPS OneDrive emulator. NODE_EXTRA_CA_CERTS is
 * set before the test workers start, so their fetch trusts it.
 */
import { rmSync } from 'node:fs';
import type { TestProject } from 'vitest/node';
import { type LocalCertificate, sharedLocalCertificate } from '@weft/cloud-emulators/tls';

declare module 'vitest' {
  export interface ProvidedContext {
    emulatorTls: { cert: string; key: string; caFile: string };
  }
}

let made: (LocalCertificate & { created: boolean }) | undefined;

export function setup(project: TestProject): void {
  made = sharedLocalCertificate();
  process.env.NODE_EXTRA_CA_CERTS = made.caFile;
  project.provide('emulatorTls', { cert: made.cert, key: made.key, caFile: made.caFile });
}

export function teardown(): void {
  if (made?.created) rmSync(made.dir, { recursive: true, force: true });
}
