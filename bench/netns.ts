/**
 * Shaped links in network namespaces for benches (root and `ip`/`tc` needed): a namespace
 * joined to this one by a veth pair, each direction's rate capped by a `tc tbf` qdisc on the
 * sending end. A server started under `launcher` listening on `nsAddress` is reached from
 * here through the link (e.g. `startS3Proxy({ host: ns.nsAddress, launcher: ns.launcher })`).
 *
 * This kernel has no sch_netem (CONFIG_NET_SCH_NETEM is off): links are rate-shaped only, no
 * added delay; tbf's queue bound (`latency`) is what a full link adds.
 */
import { execFileSync } from 'node:child_process';

export interface ShapedLinkOptions {
  /** Rate towards this namespace (what a reader here receives), Mbit/s. */
  readonly downMbit: number;
  /** Rate towards the namespace (uploads), Mbit/s; unshaped when absent. */
  readonly upMbit?: number;
}

export interface ShapedNamespace {
  readonly name: string;
  /** This (the root) namespace's end of the link. */
  readonly hostAddress: string;
  /** The namespace's end: what a server inside listens on. */
  readonly nsAddress: string;
  /** Command prefix that runs a program inside the namespace. */
  readonly launcher: readonly string[];
  readonly options: ShapedLinkOptions;
  close(): void;
}

const ip = (...args: string[]): void =>
  void execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });

function tbf(dev: string, mbit: number, inNs?: string): void {
  // Burst: 10 ms at the rate (at least 64 KiB, so a GSO packet always fits).
  const burst = Math.max(64 * 1024, Math.round((mbit * 1e6) / 8 / 100));
  const args = ['qdisc', 'add', 'dev', dev, 'root', 'tbf', 'rate', `${mbit}mbit`, 'burst', `${burst}`];
  const cmd = [...args, 'latency', '50ms'];
  if (inNs) ip('netns', 'exec', inNs, 'tc', ...cmd);
  else execFileSync('tc', cmd, { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** Whether this process may build namespaces and links (root with `ip` and `tc`). */
export function canShape(): boolean {
  try {
    execFileSync('tc', ['-V'], { stdio: 'ignore' });
    execFileSync('ip', ['netns', 'list'], { stdio: 'ignore' });
    return process.getuid?.() === 0;
  } catch {
    return false;
  }
}

/**
 * Namespace number `index` (0–63) of this process: 10.231.<pid-derived>.<4·index>/30. Left
 * behind by a crash: `ip netns del <name>` (names are `weft-<pid>-<index>`).
 */
export function shapedNamespace(index: number, options: ShapedLinkOptions): ShapedNamespace {
  if (!Number.isInteger(index) || index < 0 || index > 63) throw new RangeError(`namespace index ${index}`);
  const tag = `${process.pid % 100000}-${index}`;
  const name = `weft-${tag}`;
  const host = `wh${tag}`;
  const peer = `wn${tag}`;
  const net = `10.231.${process.pid % 250}.${index * 4}`;
  const base = net.split('.').slice(0, 3).join('.');
  const hostAddress = `${base}.${index * 4 + 1}`;
  const nsAddress = `${base}.${index * 4 + 2}`;
  ip('netns', 'add', name);
  try {
    ip('link', 'add', host, 'type', 'veth', 'peer', 'name', peer);
    ip('link', 'set', peer, 'netns', name);
    ip('addr', 'add', `${hostAddress}/30`, 'dev', host);
    ip('link', 'set', host, 'up');
    ip('netns', 'exec', name, 'ip', 'addr', 'add', `${nsAddress}/30`, 'dev', peer);
    ip('netns', 'exec', name, 'ip', 'link', 'set', peer, 'up');
    ip('netns', 'exec', name, 'ip', 'link', 'set', 'lo', 'up');
    tbf(peer, options.downMbit, name);
    if (options.upMbit !== undefined) tbf(host, options.upMbit);
  } catch (e) {
    close();
    throw e;
  }
  function close(): void {
    for (const args of [
      ['link', 'del', host],
      ['netns', 'del', name],
    ])
      try {
        ip(...args);
      } catch {
        /* already gone */
      }
  }
  return { name, hostAddress, nsAddress, launcher: ['ip', 'netns', 'exec', name], options, close };
}
