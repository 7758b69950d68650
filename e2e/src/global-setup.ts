/** One s3proxy for the e2e run (the object tier of the proxy in the s3 variants). */
import type { TestProject } from 'vitest/node';
import { type RunningS3Proxy, type S3Endpoint, startS3Proxy } from '@weft/providers/testing';

declare module 'vitest' {
  export interface ProvidedContext {
    s3: S3Endpoint;
  }
}

let proxy: RunningS3Proxy | undefined;

export async function setup(project: TestProject): Promise<void> {
  proxy = await startS3Proxy();
  const { stop: _stop, ...endpoint } = proxy;
  project.provide('s3', endpoint);
}

export async function teardown(): Promise<void> {
  await proxy?.stop();
}
