/**
 * The package graph (docs/architecture.md, "Dependency graph"): every package's imports —
 * by package name, or by a relative path into another package — and its package.json
 * `@weft/` dependencies follow the allowed edges written in that doc's `package-graph`
 * block. The client (core) and the server (mirror, proxy-server) never import each other;
 * nothing imports a package above it. It lives in the wire project because wire is at the
 * bottom of the graph every package shares; it reads the whole repository.
 */
import * as fs from 'node:fs';
import * as nodePath from 'node:path';
import { describe, expect, it } from 'vitest';

const repo = nodePath.resolve(import.meta.dirname, '..', '..', '..');

interface Allowed {
  /** Any import of anything (e2e, bench). */
  readonly any: boolean;
  /** Specifier ('@weft/x' = the package and its subpaths, '@weft/x/sub' = that entry only) → tests only. */
  readonly edges: ReadonlyMap<string, boolean>;
}

/** The `package-graph` block of docs/architecture.md. */
export function parseGraph(markdown: string): Map<string, Allowed> {
  const block = /```package-graph\n([\s\S]*?)```/.exec(markdown)?.[1];
  if (block === undefined) throw new Error('docs/architecture.md has no package-graph block');
  const graph = new Map<string, Allowed>();
  for (const line of block.split('\n')) {
    if (line.trim() === '') continue;
    const m = /^(@weft\/[a-z0-9-]+):(.*)$/.exec(line.trim());
    if (!m?.[1]) throw new Error(`package-graph: cannot read "${line}"`);
    const words = (m[2] ?? '').trim().split(/\s+/).filter(Boolean);
    const edges = new Map<string, boolean>();
    for (const w of words) {
      if (w === '*') continue;
      const e = /^(@weft\/[a-z0-9-]+(?:\/[a-z0-9-]+)?)(\(test\))?$/.exec(w);
      if (!e?.[1]) throw new Error(`package-graph: cannot read "${w}" of ${m[1]}`);
      edges.set(e[1], e[2] !== undefined);
    }
    graph.set(m[1], { any: words.includes('*'), edges });
  }
  return graph;
}

/** Why `from` may not use `spec` (undefined: it may). `inTest`: from a test, bench or script, not src/. */
export function refusal(
  graph: ReadonlyMap<string, Allowed>,
  from: string,
  spec: string,
  inTest: boolean,
): string | undefined {
  const allowed = graph.get(from);
  if (!allowed) return `${from} is not in the package graph`;
  const pkg = /^@weft\/[a-z0-9-]+/.exec(spec)?.[0];
  if (!pkg || pkg === from || allowed.any) return undefined;
  for (const key of [spec, pkg]) {
    const testOnly = allowed.edges.get(key);
    if (testOnly === undefined) continue;
    if (testOnly && !inTest) return `${from} uses ${spec} outside its tests (allowed in tests only)`;
    return undefined;
  }
  return `${from} may not depend on ${spec}`;
}

interface Pkg {
  readonly name: string;
  readonly dir: string;
  readonly json: {
    dependencies?: Record<string, string>;
    devDependencies?: Record<string, string>;
    peerDependencies?: Record<string, string>;
    optionalDependencies?: Record<string, string>;
  };
}

function packages(): Pkg[] {
  const dirs = ['packages', 'apps'].flatMap((d) =>
    fs.readdirSync(nodePath.join(repo, d)).map((n) => nodePath.join(repo, d, n)),
  );
  dirs.push(nodePath.join(repo, 'e2e'), nodePath.join(repo, 'bench'));
  return dirs
    .filter((d) => fs.existsSync(nodePath.join(d, 'package.json')))
    .map((dir) => {
      const json = JSON.parse(fs.readFileSync(nodePath.join(dir, 'package.json'), 'utf8')) as Pkg['json'] & {
        name: string;
      };
      return { name: json.name, dir, json };
    });
}

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (e.name === 'node_modules' || e.name === 'dist' || e.name.startsWith('.')) continue;
    const p = nodePath.join(dir, e.name);
    if (e.isDirectory()) out.push(...sources(p));
    else if (/\.(?:m?ts|tsx)$/.test(e.name) && !e.name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

function specifiers(text: string): string[] {
  return [
    ...text.matchAll(/(?:^|\n)\s*(?:import|export)[^'"`;]*?from\s+['"]([^'"]+)['"]/g),
    ...text.matchAll(/(?:^|\n)\s*import\s+['"]([^'"]+)['"]/g),
    ...text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g),
    ...text.matchAll(/\brequire\(\s*['"]([^'"]+)['"]\s*\)/g),
  ].map((m) => m[1] ?? '');
}

const graph = parseGraph(fs.readFileSync(nodePath.join(repo, 'docs', 'architecture.md'), 'utf8'));
const all = packages();

describe('package graph (docs/architecture.md)', () => {
  it('lists every package of the repository, and only those', () => {
    expect([...graph.keys()].sort()).toEqual(all.map((p) => p.name).sort());
  });

  it('refuses an import against the graph: client and server never import each other, nothing imports upwards', () => {
    expect(refusal(graph, '@weft/mirror', '@weft/core', false)).toMatch(/may not depend/);
    expect(refusal(graph, '@weft/proxy-server', '@weft/core', true)).toMatch(/may not depend/);
    expect(refusal(graph, '@weft/core', '@weft/mirror', false)).toMatch(/may not depend/);
    expect(refusal(graph, '@weft/core', '@weft/proxy-server/x', false)).toMatch(/may not depend/);
    expect(refusal(graph, '@weft/wire', '@weft/core', false)).toMatch(/may not depend/);
    expect(refusal(graph, '@weft/providers', '@weft/wire', false)).toMatch(/may not depend/);
    expect(refusal(graph, '@weft/mirror', '@weft/cloud-emulators', false)).toMatch(/tests only/);
    expect(refusal(graph, '@weft/mirror', '@weft/cloud-emulators/gdrive', true)).toBeUndefined();
    expect(refusal(graph, '@weft/e2e', '@weft/desktop', false)).toBeUndefined();
  });

  it('a subpath edge allows that entry point only', () => {
    const g = parseGraph('```package-graph\n@weft/a: @weft/b/leaf @weft/c(test)\n@weft/b:\n@weft/c:\n```\n');
    expect(refusal(g, '@weft/a', '@weft/b/leaf', false)).toBeUndefined();
    expect(refusal(g, '@weft/a', '@weft/b', false)).toMatch(/may not depend/);
    expect(refusal(g, '@weft/a', '@weft/b/other', false)).toMatch(/may not depend/);
    expect(refusal(g, '@weft/a', '@weft/c', false)).toMatch(/tests only/);
    expect(refusal(g, '@weft/a', '@weft/c/x', true)).toBeUndefined();
    expect(refusal(g, '@weft/z', '@weft/b', true)).toMatch(/not in the package graph/);
  });

  for (const pkg of all) {
    it(`${pkg.name}: imports follow the graph`, () => {
      const bad: string[] = [];
      const src = nodePath.join(pkg.dir, 'src') + nodePath.sep;
      for (const file of sources(pkg.dir)) {
        const inTest = !file.startsWith(src);
        const where = nodePath.relative(repo, file);
        for (const spec of specifiers(fs.readFileSync(file, 'utf8'))) {
          if (spec.startsWith('.')) {
            // A relative path into another package is an import of that package's insides.
            const abs = nodePath.resolve(nodePath.dirname(file), spec);
            const other = all.find(
              (p) =>
                p !== pkg &&
                abs.startsWith(p.dir + nodePath.sep) &&
                !(pkg.dir.startsWith(p.dir + nodePath.sep) || p.dir.startsWith(pkg.dir + nodePath.sep)),
            );
            if (!other) continue;
            if (!graph.get(pkg.name)?.any)
              bad.push(`${where} → ${spec} (a relative path into ${other.name})`);
            continue;
          }
          if (!spec.startsWith('@weft/')) continue;
          const why = refusal(graph, pkg.name, spec, inTest);
          if (why) bad.push(`${where} → ${spec}: ${why}`);
        }
      }
      expect(bad).toEqual([]);
    });

    it(`${pkg.name}: package.json declares only what the graph allows`, () => {
      const bad: string[] = [];
      const sections = [
        ['dependencies', false],
        ['peerDependencies', false],
        ['optionalDependencies', false],
        ['devDependencies', true],
      ] as const;
      for (const [section, dev] of sections) {
        for (const dep of Object.keys(pkg.json[section] ?? {})) {
          if (!dep.startsWith('@weft/')) continue;
          const allowed = graph.get(pkg.name);
          // A subpath edge (@weft/providers/paths) is a dependency on its package.
          const viaSubpath = [...(allowed?.edges.keys() ?? [])].some((k) => k.startsWith(dep + '/'));
          const why = viaSubpath ? undefined : refusal(graph, pkg.name, dep, dev);
          if (why) bad.push(`${section}: ${why}`);
        }
      }
      expect(bad).toEqual([]);
    });
  }
});
