// Tests run from source but need build/*.wasm: build it when missing or older than the
// AssemblyScript sources, so `vitest run` works on a fresh clone.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export default function setup(): void {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const wasm = `${root}build/reed-solomon.wasm`;
  const sources = readdirSync(`${root}assembly`).map((f) => statSync(`${root}assembly/${f}`).mtimeMs);
  if (existsSync(wasm) && statSync(wasm).mtimeMs >= Math.max(...sources)) return;
  execFileSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit' });
}
