/**
 * syncfs(2) of the filesystem tier without forking the proxy at each checkpoint (issue #16).
 * Node has no syncfs; `sync -f <root>` does it, but each execFile forks the calling process,
 * whose page tables grow with its heap: at a few hundred MiB, ~11 ms of CPU per checkpoint in
 * the caller (measured: 50 calls from a 765 MiB node process) against ~0.2 ms here. So one small
 * shell is started once (the only fork of the caller), and each sync is a line written to it:
 * it runs `sync -f` (its own fork, of a tiny process) and answers the exit status.
 *
 * The shell never keeps the caller alive: its process and pipes are unref'd, except while a
 * sync is awaited. It ends when its stdin closes (close(), or the caller's exit). If it dies,
 * the syncs awaited get `false` (the caller falls back to an fsync per file) and the next
 * sync starts a new one; if no shell can be started, every sync answers `false`.
 */
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';

/** The shell's loop: one `sync -f` per line read, its exit status written back. */
const LOOP = 'while read -r _; do sync -f -- "$1" 2>/dev/null; echo $?; done';

type Helper = ChildProcessByStdio<Writable, Readable, null>;

export class TierSync {
  /** Shells started (each one fork of the caller) and syncs answered. */
  readonly stats = { starts: 0, syncs: 0 };
  private child: Helper | undefined;
  private unavailable = false;
  private readonly waiting: ((ok: boolean) => void)[] = [];
  private pending = '';

  constructor(private readonly root: string) {}

  /** The pid of the running shell (tests), if any. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Sync the filesystem holding `root`: true once done, false when it could not be (fall back). */
  sync(): Promise<boolean> {
    const child = this.start();
    if (!child) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      this.waiting.push(resolve);
      this.hold(child, true);
      child.stdin.write('\n');
    });
  }

  /** End the shell (it exits once its stdin closes). */
  close(): void {
    const child = this.child;
    this.child = undefined;
    child?.stdin.end();
    this.fail();
  }

  private start(): Helper | undefined {
    if (this.child) return this.child;
    if (this.unavailable) return undefined;
    let child: Helper;
    try {
      child = spawn('sh', ['-c', LOOP, 'weft-tier-sync', this.root], { stdio: ['pipe', 'pipe', 'ignore'] });
    } catch {
      this.unavailable = true;
      return undefined;
    }
    this.stats.starts++;
    this.child = child;
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (text: string) => {
      this.pending += text;
      for (let nl = this.pending.indexOf('\n'); nl >= 0; nl = this.pending.indexOf('\n')) {
        const status = this.pending.slice(0, nl).trim();
        this.pending = this.pending.slice(nl + 1);
        this.stats.syncs++;
        this.waiting.shift()?.(status === '0');
      }
      if (this.waiting.length === 0) this.hold(child, false);
    });
    const gone = (): void => {
      if (this.child !== child) return;
      this.child = undefined;
      this.fail();
    };
    child.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') this.unavailable = true;
      gone();
    });
    child.on('exit', gone);
    child.stdin.on('error', gone); // EPIPE: it died; 'exit' follows
    this.hold(child, false);
    return child;
  }

  /** Keep the caller alive while a sync is awaited, never otherwise. */
  private hold(child: Helper, on: boolean): void {
    const socket = child.stdout as Readable & { ref?: () => void; unref?: () => void };
    if (on) {
      child.ref();
      socket.ref?.();
    } else {
      child.unref();
      socket.unref?.();
      (child.stdin as Writable & { unref?: () => void }).unref?.();
    }
  }

  /** What waits gets false: the caller falls back to an fsync per file. */
  private fail(): void {
    this.pending = '';
    for (const w of this.waiting.splice(0)) w(false);
  }
}
