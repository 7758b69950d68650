/**
 * One s3proxy for the e2e run (the object tier of the proxy in the s3 variants), and the
 * proxy built once as one JavaScript file for the scenarios that start it as a process
 * (src/proxy-bundle.ts; WEFT_PROXY_FROM_SOURCE=1 starts them from TypeScript through tsx).
 */
import * as fsp from 'node:fs/promises';
import type { TestProject } from 'vitest/node';
import { type RunningS3Proxy, type S3Endpoint, startS3Proxy } from '@weft/providers/testing';
import { buildProxyBundle } from './proxy-bundle.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    s3: S3Endpoint;
  }
}

let proxy: RunningS3Proxy | undefined;
let bundle: string | undefined;

export async function setup(project: TestProject): Promise<void> {
  // Read by src/proxy-process.ts in the test workers, which inherit this environment.
  if (!process.env.WEFT_PROXY_FROM_SOURCE) {
    bundle = await buildProxyBundle();
    process.env.WEFT_PROXY_BUNDLE = bundle;
  }
  proxy = await startS3Proxy();
  const { stop: _stop, ...endpoint } = proxy;
  project.provide('s3', endpoint);
}

export async function teardown(): Promise<void> {
  await proxy?.stop();
  if (bundle) await fsp.rm(bundle, { force: true });
}
