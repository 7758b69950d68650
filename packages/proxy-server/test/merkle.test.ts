import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dirHash, fileLeafHash, type MerkleNode, type MerkleResponse } from '@weft/wire';
import { sha, startTestServer, TestClient } from './helpers.ts';

let server: Awaited<ReturnType<typeof startTestServer>>;
let c: TestClient;

beforeAll(async () => {
  server = await startTestServer();
  c = await TestClient.enrol(server, 'merkle', 'm');
});
afterAll(async () => server.stop());

type Tree = Record<string, string>; // path → content

/** The client's side: Eq. 9 over a local model of the tree. */
function localNode(
  tree: Tree,
  dir: string,
): { hash: string; children: Map<string, { kind: 'file' | 'dir'; hash: string }> } {
  const prefix = dir === '' ? '' : dir + '/';
  const names = new Map<string, 'file' | 'dir'>();
  for (const p of Object.keys(tree)) {
    if (!p.startsWith(prefix)) continue;
    const rest = p.slice(prefix.length);
    const [head, ...more] = rest.split('/');
    if (head) names.set(head, more.length ? 'dir' : 'file');
  }
  const children = new Map<string, { kind: 'file' | 'dir'; hash: string }>();
  for (const [name, kind] of names) {
    const path = prefix + name;
    const hash =
      kind === 'file'
        ? Buffer.from(fileLeafHash(path, sha(tree[path] ?? ''))).toString('hex')
        : localNode(tree, path).hash;
    children.set(name, { kind, hash });
  }
  const hash = dirHash(
    dir,
    [...children].map(([name, v]) => ({ name, kind: v.kind, hash: Buffer.from(v.hash, 'hex') })),
  );
  return { hash: Buffer.from(hash).toString('hex'), children };
}

/** Top-down exchange: returns divergent paths and the number of round trips. */
async function diverging(tree: Tree): Promise<{ paths: string[]; rounds: number }> {
  let frontier = [''];
  const out: string[] = [];
  let rounds = 0;
  while (frontier.length) {
    rounds += 1;
    const { nodes } = await c.json<MerkleResponse>('POST', '/v1/merkle', { paths: frontier });
    const next: string[] = [];
    for (const n of nodes as MerkleNode[]) {
      const local = localNode(tree, n.path);
      if (n.hash === local.hash) continue;
      for (const child of n.children ?? []) {
        const path = n.path === '' ? child.name : `${n.path}/${child.name}`;
        const mine = local.children.get(child.name);
        if (mine?.hash === child.hash) continue;
        if (child.kind === 'dir' && mine?.kind === 'dir') next.push(path);
        else out.push(path);
      }
      for (const [name] of local.children) {
        if (!(n.children ?? []).some((ch) => ch.name === name))
          out.push(n.path === '' ? name : `${n.path}/${name}`);
      }
    }
    frontier = next;
  }
  return { paths: out.sort(), rounds };
}

describe('Merkle consistency check', () => {
  it('findsDivergentEntriesInHeightRoundTrips', async () => {
    const tree: Tree = {
      'a/b/c/deep.txt': 'deep',
      'a/b/x.txt': 'x',
      'a/y.txt': 'y',
      'top.txt': 'top',
      'z/1.txt': '1',
    };
    await c.putSmall(tree);
    expect(await diverging(tree)).toEqual({ paths: [], rounds: 1 });
    const changed = { ...tree, 'a/b/c/deep.txt': 'DEEP', 'z/2.txt': 'only here' };
    const result = await diverging(changed);
    expect(result.paths).toEqual(['a/b/c/deep.txt', 'z/2.txt']);
    expect(result.rounds).toBe(4); // root, a, a/b, a/b/c — the tree's height
    // After the server changes, its cached folder hashes are refreshed along the path.
    await c.putSmall({ 'a/b/c/deep.txt': 'DEEP', 'z/2.txt': 'only here' });
    expect((await diverging(changed)).paths).toEqual([]);
  });
});
