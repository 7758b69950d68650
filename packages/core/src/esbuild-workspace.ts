/**
 * The esbuild plugin both bundles of the repository use (the `weft` command, build-bundle.ts;
 * the e2e runs' proxy, e2e/src/proxy-bundle.ts): only the workspace's own packages (@weft/*,
 * and the node_modules packages named in `bundled`) are bundled, every other package stays an
 * import; and each workspace source keeps its own `import.meta.url`, `.dirname` and
 * `.filename` (replaced at build time by its source file's), so what a module finds beside
 * itself (SQL migrations, wasm builds, the desktop renderer) is found where it is in the tree.
 *
 * Only esbuild's types are imported: whoever builds brings esbuild.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Plugin } from 'esbuild';

export function workspaceOnlyPlugin(bundled: readonly string[] = []): Plugin {
  return {
    name: 'weft-workspace-only',
    setup(b) {
      b.onResolve({ filter: /^[^./]/ }, (a) =>
        a.path.startsWith('@weft/') || bundled.some((m) => a.path === m || a.path.startsWith(m + '/'))
          ? undefined
          : { path: a.path, external: true },
      );
      b.onLoad({ filter: /\.m?ts$/ }, async (a) => {
        if (a.path.includes(`${nodePath.sep}node_modules${nodePath.sep}`)) return undefined;
        const source = await fsp.readFile(a.path, 'utf8');
        return {
          contents: source
            .replaceAll('import.meta.url', JSON.stringify(pathToFileURL(a.path).href))
            .replaceAll('import.meta.dirname', JSON.stringify(nodePath.dirname(a.path)))
            .replaceAll('import.meta.filename', JSON.stringify(a.path)),
          loader: 'ts',
          resolveDir: nodePath.dirname(a.path),
        };
      });
    },
  };
}
