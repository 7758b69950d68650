/**
 * Starts one s3proxy for the object-tier-on-S3 tests (reusing @weft/providers/testing),
 * unless WEFT_TEST_S3_ENDPOINT points at another S3-compatible endpoint. With
 * WEFT_TEST_METADATA=postgres it also starts one PostgreSQL cluster (src/testing/postgres.ts),
 * and every server the tests start (helpers.ts startTestServer) keeps its metadata in a
 * database of its own there: the whole proxy suite on the PostgreSQL store.
 */
import type { TestProject } from 'vitest/node';
import { type RunningS3Proxy, type S3Endpoint, startS3Proxy } from '@weft/providers/testing';
import { adminSql } from './pg-admin.ts';
import { type RunningPostgres, startPostgres } from '../src/testing/postgres.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    proxyS3: S3Endpoint;
    /** The cluster's maintenance database URL (WEFT_TEST_METADATA=postgres), or ''. */
    proxyPostgres: string;
  }
}

let proxy: RunningS3Proxy | undefined;
let pg: RunningPostgres | undefined;

export async function setup(project: TestProject): Promise<void> {
  const env = process.env;
  project.provide('proxyPostgres', '');
  if (env.WEFT_TEST_METADATA === 'postgres') {
    pg = await startPostgres(adminSql);
    project.provide('proxyPostgres', pg.url('postgres'));
  }
  if (env.WEFT_TEST_S3_ENDPOINT) {
    project.provide('proxyS3', {
      endpoint: env.WEFT_TEST_S3_ENDPOINT,
      region: env.WEFT_TEST_S3_REGION ?? 'us-east-1',
      bucket: env.WEFT_TEST_S3_BUCKET ?? 'weft-test',
      accessKeyId: env.WEFT_TEST_S3_ACCESS_KEY_ID ?? '',
      secretAccessKey: env.WEFT_TEST_S3_SECRET_ACCESS_KEY ?? '',
      forcePathStyle: env.WEFT_TEST_S3_PATH_STYLE !== 'false',
    });
    return;
  }
  proxy = await startS3Proxy({ bucket: 'weft-proxy-test' });
  const { stop: _stop, ...endpoint } = proxy;
  project.provide('proxyS3', endpoint);
}

export async function teardown(): Promise<void> {
  await pg?.stop();
  await proxy?.stop();
}
