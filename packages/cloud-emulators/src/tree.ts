/**
 * The file tree every emulator keeps: nodes with ids and parents (Drive allows duplicate
 * names; the path-based emulators refuse them themselves), content with cached hashes,
 * and an ordered change log the change feeds are cut from. State lives in memory, or on
 * disk when a data directory is given (a JSON index plus content-addressed blobs).
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import * as nodePath from 'node:path';
import { z } from 'zod';
import { dropboxContentHash, quickXorHash } from './hashes.ts';

export interface TreeNode {
  readonly id: string;
  parentId: string | null;
  name: string;
  readonly kind: 'file' | 'folder';
  content: Buffer;
  createdMs: number;
  modifiedMs: number;
  /** Set by the client (Dropbox client_modified, Drive modifiedTime, Graph fileSystemInfo). */
  clientModifiedMs: number;
  /** Increments on every change to content or metadata. */
  version: number;
  /** Increments on content changes only. */
  contentVersion: number;
  /** Free-form per-emulator metadata (Drive mimeType, description…). */
  meta: Record<string, string>;
  hashes: { sha256: string; md5: string; dropbox?: string; quickXor?: string };
}

export interface ChangeRecord {
  readonly seq: number;
  readonly id: string;
  /** Display path at the time of the change ('/a/b.txt'). */
  readonly path: string;
  readonly deleted: boolean;
  /**
   * Recorded because an ancestor folder moved, not because the item itself changed. Path
   * feeds (Dropbox) report these; id feeds (Drive changes, Graph delta) do not: there a
   * moved folder is one change and its content is not reported again.
   */
  readonly inherited?: boolean;
}

const PersistedNode = z.object({
  id: z.string(),
  parentId: z.string().nullable(),
  name: z.string(),
  kind: z.enum(['file', 'folder']),
  sha256: z.string(),
  createdMs: z.number(),
  modifiedMs: z.number(),
  clientModifiedMs: z.number(),
  version: z.number(),
  contentVersion: z.number(),
  meta: z.record(z.string()),
});
const PersistedTree = z.object({
  format: z.literal(1),
  seq: z.number(),
  nodes: z.array(PersistedNode),
  log: z.array(
    z.object({
      seq: z.number(),
      id: z.string(),
      path: z.string(),
      deleted: z.boolean(),
      inherited: z.boolean().optional(),
    }),
  ),
});

export function foldName(name: string): string {
  return name.normalize('NFC').toUpperCase().toLowerCase();
}

function hashesOf(content: Buffer): TreeNode['hashes'] {
  return {
    sha256: createHash('sha256').update(content).digest('hex'),
    md5: createHash('md5').update(content).digest('hex'),
  };
}

export interface TreeOptions {
  readonly caseInsensitive: boolean;
  readonly rootId: string;
  /** Prefix of generated ids (Dropbox's 'id:'). */
  readonly idPrefix?: string;
  readonly dataDir?: string;
  /** Change log entries kept; older cursors are expired. */
  readonly maxLog?: number;
  readonly now?: () => number;
}

export class Tree {
  readonly root: TreeNode;
  private readonly nodes = new Map<string, TreeNode>();
  private readonly kids = new Map<string, Set<string>>();
  readonly log: ChangeRecord[] = [];
  seq = 0;
  private readonly now: () => number;
  private saveTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: TreeOptions) {
    this.now = options.now ?? Date.now;
    const t = this.now();
    this.root = {
      id: options.rootId,
      parentId: null,
      name: '',
      kind: 'folder',
      content: Buffer.alloc(0),
      createdMs: t,
      modifiedMs: t,
      clientModifiedMs: t,
      version: 1,
      contentVersion: 1,
      meta: {},
      hashes: hashesOf(Buffer.alloc(0)),
    };
    this.nodes.set(this.root.id, this.root);
    if (options.dataDir) this.load(options.dataDir);
  }

  newId(): string {
    return (this.options.idPrefix ?? '') + randomBytes(12).toString('base64url');
  }

  get(id: string): TreeNode | undefined {
    return this.nodes.get(id);
  }

  all(): IterableIterator<TreeNode> {
    return this.nodes.values();
  }

  children(id: string): TreeNode[] {
    const set = this.kids.get(id);
    if (!set) return [];
    const out: TreeNode[] = [];
    for (const k of set) {
      const n = this.nodes.get(k);
      if (n) out.push(n);
    }
    return out;
  }

  childrenNamed(parentId: string, name: string): TreeNode[] {
    const want = this.options.caseInsensitive ? foldName(name) : name.normalize('NFC');
    return this.children(parentId).filter(
      (n) => (this.options.caseInsensitive ? foldName(n.name) : n.name.normalize('NFC')) === want,
    );
  }

  /** '/a/b' for a node, '' for the root. */
  pathOf(node: TreeNode): string {
    const parts: string[] = [];
    let cur: TreeNode | undefined = node;
    while (cur && cur.parentId !== null) {
      parts.push(cur.name);
      cur = this.nodes.get(cur.parentId);
    }
    return parts.length === 0 ? '' : '/' + parts.reverse().join('/');
  }

  /** Resolve '/a/b' (or '' for the root); the first match where names repeat. */
  resolve(path: string): TreeNode | undefined {
    if (path === '' || path === '/') return this.root;
    let cur: TreeNode = this.root;
    for (const seg of path.replace(/^\/+/, '').split('/')) {
      if (seg === '') return undefined;
      if (cur.kind !== 'folder') return undefined;
      const next = this.childrenNamed(cur.id, seg)[0];
      if (!next) return undefined;
      cur = next;
    }
    return cur;
  }

  isAncestor(ancestor: TreeNode, node: TreeNode): boolean {
    let cur: TreeNode | undefined = node;
    while (cur) {
      if (cur.id === ancestor.id) return true;
      cur = cur.parentId === null ? undefined : this.nodes.get(cur.parentId);
    }
    return false;
  }

  /** The node and everything below it, parents before children. */
  subtree(node: TreeNode): TreeNode[] {
    const out: TreeNode[] = [node];
    for (let i = 0; i < out.length; i++) {
      const n = out[i] as TreeNode;
      if (n.kind === 'folder') out.push(...this.children(n.id).sort((a, b) => (a.name < b.name ? -1 : 1)));
    }
    return out;
  }

  private record(node: TreeNode, deleted: boolean, inherited = false): void {
    this.seq += 1;
    this.log.push({
      seq: this.seq,
      id: node.id,
      path: this.pathOf(node),
      deleted,
      ...(inherited ? { inherited: true } : {}),
    });
    const max = this.options.maxLog ?? 200_000;
    if (this.log.length > max) this.log.splice(0, this.log.length - max);
    this.scheduleSave();
  }

  /** Oldest sequence number a cursor may still point before. */
  oldestSeq(): number {
    return (this.log[0]?.seq ?? this.seq + 1) - 1;
  }

  /**
   * One page of the change feed: the log after `afterSeq` collapsed to the latest record of
   * each `key` (a path or an id), in the order of their last change, at most `limit` keys.
   * Records `skip` rejects are passed over (the page still moves past them). `lastSeq` is
   * the last record the page covers; `more` says a further key was left for the next page.
   */
  latestChanges(
    afterSeq: number,
    limit: number,
    key: (rec: ChangeRecord) => string,
    skip: (rec: ChangeRecord) => boolean = () => false,
  ): { records: ChangeRecord[]; lastSeq: number; more: boolean } {
    const latest = new Map<string, ChangeRecord>();
    let lastSeq = afterSeq;
    let more = false;
    for (const rec of this.log) {
      if (rec.seq <= afterSeq) continue;
      if (skip(rec)) {
        lastSeq = rec.seq;
        continue;
      }
      const k = key(rec);
      if (!latest.has(k) && latest.size >= limit) {
        more = true;
        break;
      }
      latest.delete(k);
      latest.set(k, rec);
      lastSeq = rec.seq;
    }
    return { records: [...latest.values()], lastSeq, more };
  }

  /** Forget the change log: every cursor issued so far becomes expired. */
  expireLog(): void {
    this.log.splice(0, this.log.length);
  }

  create(
    parent: TreeNode,
    name: string,
    kind: 'file' | 'folder',
    content: Buffer = Buffer.alloc(0),
    options: { clientModifiedMs?: number; meta?: Record<string, string>; id?: string } = {},
  ): TreeNode {
    const t = this.now();
    const node: TreeNode = {
      id: options.id ?? this.newId(),
      parentId: parent.id,
      name,
      kind,
      content,
      createdMs: t,
      modifiedMs: t,
      clientModifiedMs: options.clientModifiedMs ?? t,
      version: 1,
      contentVersion: 1,
      meta: { ...options.meta },
      hashes: hashesOf(content),
    };
    this.nodes.set(node.id, node);
    this.link(node);
    this.record(node, false);
    return node;
  }

  private link(node: TreeNode): void {
    if (node.parentId === null) return;
    let set = this.kids.get(node.parentId);
    if (!set) {
      set = new Set();
      this.kids.set(node.parentId, set);
    }
    set.add(node.id);
  }

  private unlink(node: TreeNode): void {
    if (node.parentId !== null) this.kids.get(node.parentId)?.delete(node.id);
  }

  setContent(node: TreeNode, content: Buffer, clientModifiedMs?: number): void {
    node.content = content;
    node.hashes = hashesOf(content);
    node.modifiedMs = this.now();
    node.clientModifiedMs = clientModifiedMs ?? node.modifiedMs;
    node.version += 1;
    node.contentVersion += 1;
    this.record(node, false);
  }

  /** Record a metadata-only change. */
  touch(node: TreeNode): void {
    node.version += 1;
    node.modifiedMs = this.now();
    this.record(node, false);
  }

  /** Move and/or rename; records the old position as deleted for path-based feeds, then the new. */
  move(node: TreeNode, parent: TreeNode, name: string): void {
    const moved = this.subtree(node);
    for (const n of [...moved].reverse()) this.record(n, true, n !== node);
    this.unlink(node);
    node.parentId = parent.id;
    node.name = name;
    node.version += 1;
    this.link(node);
    for (const n of moved) this.record(n, false, n !== node);
  }

  /** Remove a node and everything below it; each is recorded as deleted, children first. */
  remove(node: TreeNode): void {
    const gone = this.subtree(node).reverse();
    for (const n of gone) this.record(n, true);
    for (const n of gone) {
      this.unlink(n);
      this.nodes.delete(n.id);
      this.kids.delete(n.id);
    }
  }

  dropboxHash(node: TreeNode): string {
    node.hashes.dropbox ??= dropboxContentHash(node.content);
    return node.hashes.dropbox;
  }

  quickXor(node: TreeNode): string {
    node.hashes.quickXor ??= quickXorHash(node.content);
    return node.hashes.quickXor;
  }

  // ---- persistence ----

  private scheduleSave(): void {
    if (!this.options.dataDir || this.saveTimer) return;
    this.saveTimer = setTimeout(() => {
      this.saveTimer = undefined;
      this.save();
    }, 200);
    this.saveTimer.unref();
  }

  /** Write the state to the data directory now (no-op in memory mode). */
  save(): void {
    const dir = this.options.dataDir;
    if (!dir) return;
    if (this.saveTimer) clearTimeout(this.saveTimer);
    this.saveTimer = undefined;
    const blobs = nodePath.join(dir, 'blobs');
    mkdirSync(blobs, { recursive: true });
    const nodes = [];
    for (const n of this.nodes.values()) {
      if (n.parentId === null) continue;
      const blob = nodePath.join(blobs, n.hashes.sha256);
      if (n.kind === 'file' && !existsSync(blob)) writeFileSync(blob, n.content);
      nodes.push({
        id: n.id,
        parentId: n.parentId,
        name: n.name,
        kind: n.kind,
        sha256: n.hashes.sha256,
        createdMs: n.createdMs,
        modifiedMs: n.modifiedMs,
        clientModifiedMs: n.clientModifiedMs,
        version: n.version,
        contentVersion: n.contentVersion,
        meta: n.meta,
      });
    }
    const state: z.infer<typeof PersistedTree> = { format: 1, seq: this.seq, nodes, log: this.log };
    const file = nodePath.join(dir, 'tree.json');
    writeFileSync(file + '.tmp', JSON.stringify(state));
    renameSync(file + '.tmp', file);
  }

  private load(dir: string): void {
    const file = nodePath.join(dir, 'tree.json');
    if (!existsSync(file)) return;
    const state = PersistedTree.parse(JSON.parse(readFileSync(file, 'utf8')));
    this.seq = state.seq;
    this.log.push(...state.log);
    for (const p of state.nodes) {
      const content =
        p.kind === 'file' ? readFileSync(nodePath.join(dir, 'blobs', p.sha256)) : Buffer.alloc(0);
      const node: TreeNode = {
        id: p.id,
        parentId: p.parentId,
        name: p.name,
        kind: p.kind,
        content,
        createdMs: p.createdMs,
        modifiedMs: p.modifiedMs,
        clientModifiedMs: p.clientModifiedMs,
        version: p.version,
        contentVersion: p.contentVersion,
        meta: p.meta,
        hashes: hashesOf(content),
      };
      this.nodes.set(node.id, node);
    }
    for (const n of this.nodes.values()) this.link(n);
  }
}
