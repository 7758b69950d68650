/** The proxy as a child process for kill -9 tests: `bin/weft-proxy.mjs --config <file>`. */
import { spawn, type ChildProcess } from 'node:child_process';
import * as nodePath from 'node:path';
import { fileURLToPath } from 'node:url';

const BIN = nodePath.resolve(fileURLToPath(import.meta.url), '../../bin/weft-proxy.mjs');

/** Starts the proxy on `configFile`; resolves with its URL once it says it is listening. */
export async function startProxyChild(configFile: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [BIN, '--config', configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const onData = (b: Buffer): void => {
      out += b.toString();
      const m = /weft-proxy listening on (http:\/\/\S+)/.exec(out);
      if (m?.[1]) resolve(m[1]);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`server exited (${code}): ${out}`)));
  });
  return { child, url };
}
