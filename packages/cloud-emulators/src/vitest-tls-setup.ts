/**
 * A vitest global setup for the tests that talk to the HTTPS OneDrive emulator: the shared
 * throwaway CA and localhost certificate (tls.ts, made with openssl at setup time, never
 * committed), trusted by the test workers' fetch through NODE_EXTRA_CA_CERTS, which is set
 * before they start. Tests read it with `inject('emulatorTls')`. A package uses it from a
 * one-line test/emulators-setup.ts that re-exports `setup` and `teardown`.
 */
import { rmSync } from 'node:fs';
import type { TestProject } from 'vitest/node';
import { type LocalCertificate, sharedLocalCertificate } from './tls.ts';

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
