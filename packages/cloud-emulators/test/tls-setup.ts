/** A throwaway CA for the HTTPS OneDrive emulator; workers trust it through NODE_EXTRA_CA_CERTS. */
import { rmSync } from 'node:fs';
import type { TestProject } from 'vitest/node';
import { type LocalCertificate, sharedLocalCertificate } from '../src/tls.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    tls: { cert: string; key: string };
  }
}

let made: (LocalCertificate & { created: boolean }) | undefined;

export function setup(project: TestProject): void {
  made = sharedLocalCertificate();
  process.env.NODE_EXTRA_CA_CERTS = made.caFile;
  project.provide('tls', { cert: made.cert, key: made.key });
}

export function teardown(): void {
  if (made?.created) rmSync(made.dir, { recursive: true, force: true });
}
