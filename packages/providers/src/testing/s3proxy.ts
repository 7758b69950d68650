/**
 * Starts a real S3-compatible server for tests: s3proxy (org.gaul:s3proxy,
 * jar-with-dependencies from Maven Central, fetched with Maven into the project's
 * .cache folder on first use) on a free loopback port, with a fresh bucket.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';

export const S3PROXY_VERSION = '4.1.0';

export interface S3Endpoint {
  readonly endpoint: string;
  readonly region: string;
  readonly bucket: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly forcePathStyle: boolean;
}

export interface RunningS3Proxy extends S3Endpoint {
  stop(): Promise<void>;
}

const run = promisify(execFile);

/** The project's cache folder (gitignored), overridable with WEFT_CACHE_DIR. */
export function cacheDir(): string {
  if (process.env.WEFT_CACHE_DIR) return process.env.WEFT_CACHE_DIR;
  // src/testing -> providers -> packages -> repo root
  return nodePath.resolve(fileURLToPath(import.meta.url), '../../../../../.cache');
}

/** Path of the s3proxy jar, fetched with Maven when missing. */
export async function ensureS3ProxyJar(): Promise<string> {
  const dir = nodePath.join(cacheDir(), 's3proxy');
  const jar = nodePath.join(dir, `s3proxy-${S3PROXY_VERSION}-jar-with-dependencies.jar`);
  if (existsSync(jar)) return jar;
  await fsp.mkdir(dir, { recursive: true });
  try {
    await run(
      'mvn',
      [
        '-q',
        '-B',
        'dependency:copy',
        `-Dartifact=org.gaul:s3proxy:${S3PROXY_VERSION}:jar:jar-with-dependencies`,
        `-DoutputDirectory=${dir}`,
      ],
      { maxBuffer: 16 << 20 },
    );
  } catch (e) {
    throw new Error(
      `could not fetch s3proxy ${S3PROXY_VERSION} with Maven (is mvn installed?): ${String(e)}`,
    );
  }
  if (!existsSync(jar)) throw new Error(`Maven finished but ${jar} is missing`);
  return jar;
}

export interface StartS3ProxyOptions {
  /** Keep objects in this folder (jclouds filesystem backend); default: in memory (transient). */
  readonly dataDir?: string;
  readonly bucket?: string;
  /** Listen on this port (default: a free one), e.g. to come back where a stopped one was. */
  readonly port?: number;
  /** The secret to accept (default: a random one), e.g. to come back with the same one. */
  readonly secretAccessKey?: string;
  /** Address to listen on (default 127.0.0.1), e.g. a network namespace's own (bench/netns.ts). */
  readonly host?: string;
  /** Command prefix to start Java under, e.g. `['ip', 'netns', 'exec', name]`. */
  readonly launcher?: readonly string[];
}

/** Start s3proxy (on 127.0.0.1 unless `host`) with a free port and create the bucket. */
export async function startS3Proxy(options: StartS3ProxyOptions = {}): Promise<RunningS3Proxy> {
  const jar = await ensureS3ProxyJar();
  const work = await fsp.mkdtemp(nodePath.join(cacheDir(), 's3proxy-run-'));
  const accessKeyId = 'weft-test';
  const host = options.host ?? '127.0.0.1';
  const secretAccessKey = options.secretAccessKey ?? randomBytes(16).toString('hex');
  const props = [
    `s3proxy.endpoint=http://${host}:${options.port ?? 0}`,
    's3proxy.authorization=aws-v2-or-v4',
    `s3proxy.identity=${accessKeyId}`,
    `s3proxy.credential=${secretAccessKey}`,
    options.dataDir ? 'jclouds.provider=filesystem' : 'jclouds.provider=transient',
    options.dataDir ? `jclouds.filesystem.basedir=${options.dataDir}` : '',
    'jclouds.identity=weft',
    'jclouds.credential=weft',
  ].filter((l) => l !== '');
  const propsFile = nodePath.join(work, 's3proxy.conf');
  await fsp.writeFile(propsFile, props.join('\n') + '\n');
  const [command, ...args] = [...(options.launcher ?? []), 'java', '-Xmx2g', '-jar', jar];
  const child = spawn(command!, [...args, '--properties', propsFile], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LOG_LEVEL: 'info' },
  });
  const port = await waitForPort(child, host);
  const endpoint = `http://${host}:${port}`;
  const bucket = options.bucket ?? 'weft-test';
  const client = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId, secretAccessKey },
  });
  try {
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
  } catch (e) {
    if ((e as { name?: string }).name !== 'BucketAlreadyOwnedByYou') throw e;
  } finally {
    client.destroy();
  }
  return {
    endpoint,
    region: 'us-east-1',
    bucket,
    accessKeyId,
    secretAccessKey,
    forcePathStyle: true,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
        // Gone for sure before stop() resolves: a test that stops it expects refused connections.
        if (child.exitCode === null && child.signalCode === null) {
          child.kill('SIGKILL');
          await exited;
        }
      }
      await fsp.rm(work, { recursive: true, force: true });
    },
  };
}

function waitForPort(child: ChildProcess, host: string): Promise<number> {
  const started = new RegExp(
    String.raw`Started \S*ServerConnector@\S+\{HTTP/1\.1, \(http/1\.1\)\}\{` +
      host.replace(/\./g, '\\.') +
      String.raw`:(\d+)\}`,
  );
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`s3proxy did not start within 60 s; output:\n${out.slice(-4000)}`));
    }, 60_000);
    const onData = (buf: Buffer): void => {
      out += buf.toString();
      const m = started.exec(out);
      if (m?.[1]) {
        clearTimeout(timer);
        child.stdout?.off('data', onData);
        child.stderr?.off('data', onData);
        // Keep draining so the child never blocks on a full pipe.
        child.stdout?.resume();
        child.stderr?.resume();
        resolve(Number(m[1]));
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`s3proxy exited with ${code}; output:\n${out.slice(-4000)}`));
    });
  });
}
