/** The HTTPS OneDrive emulator's certificate for this package's tests (its doc comment says how). */
export { setup, teardown } from '@weft/cloud-emulators/vitest-tls-setup';
