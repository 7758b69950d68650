// A timeline of one drop across processes (issue #16, WEFT_BENCH_TIMELINE=1 in
// small-files.bench.ts): every HTTP request the agent sends the proxy and the proxy sends S3
// (through recording forwarders on loopback — no change to either process), the agent's state,
// and each process's CPU use sampled from /proc/<pid>/stat every 100 ms. Printed as one line
// per request (arrival, body received, response, size) and a CPU strip per process, so the
// gaps where one side waits for the other show: what serialises the drop, beside its CPU.
import * as http from 'node:http';
import * as net from 'node:net';
import { readFileSync } from 'node:fs';

export interface RequestSpan {
  /** Which hop: 'agent→proxy' or 'proxy→s3'. */
  readonly hop: string;
  readonly method: string;
  readonly path: string;
  /** ms since the timeline's start: request head arrived, request body fully received, response head, response end. */
  readonly start: number;
  bodyIn: number;
  head: number;
  end: number;
  bytesIn: number;
  bytesOut: number;
  status: number;
}

export interface Mark {
  readonly t: number;
  readonly what: string;
}

/** CPU-seconds (user + system) of a process, -1 once gone. */
function cpuTicks(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return -1;
  }
}

export class Timeline {
  readonly t0 = performance.now();
  readonly spans: RequestSpan[] = [];
  readonly marks: Mark[] = [];
  /** Per process: CPU utilisation (cores) per 100 ms slot, from the slot's start. */
  readonly cpu = new Map<string, { t: number; cores: number }[]>();
  private readonly samplers: NodeJS.Timeout[] = [];

  now(): number {
    return performance.now() - this.t0;
  }

  mark(what: string): void {
    this.marks.push({ t: this.now(), what });
  }

  /** Sample `pid`'s CPU every `everyMs` as `name` until stop(). */
  sample(name: string, pid: number | undefined, everyMs = 100): void {
    if (pid === undefined) return;
    const out: { t: number; cores: number }[] = [];
    this.cpu.set(name, out);
    let lastT = this.now();
    let lastCpu = cpuTicks(pid);
    const timer = setInterval(() => {
      const t = this.now();
      const c = cpuTicks(pid);
      if (c < 0 || lastCpu < 0) return;
      out.push({ t: lastT, cores: (c - lastCpu) / ((t - lastT) / 1000) });
      lastT = t;
      lastCpu = c;
    }, everyMs);
    timer.unref();
    this.samplers.push(timer);
  }

  stop(): void {
    for (const s of this.samplers) clearInterval(s);
    this.samplers.length = 0;
  }

  /**
   * An HTTP forwarder on a loopback port 0 to `target` (http://host:port) recording every
   * request as a span of `hop`; WebSocket upgrades are passed through unrecorded. Headers go
   * unchanged (Host included: S3's signature covers it).
   */
  async forwarder(hop: string, target: string): Promise<{ url: string; close(): Promise<void> }> {
    const to = new URL(target);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
    const server = http.createServer((req, res) => {
      const span: RequestSpan = {
        hop,
        method: req.method ?? '?',
        path: (req.url ?? '').split('?')[0] ?? '',
        start: this.now(),
        bodyIn: 0,
        head: 0,
        end: 0,
        bytesIn: 0,
        bytesOut: 0,
        status: 0,
      };
      this.spans.push(span);
      const up = http.request(
        {
          host: to.hostname,
          port: Number(to.port),
          method: req.method,
          path: req.url,
          headers: req.headers,
          agent,
        },
        (r) => {
          span.head = this.now();
          span.status = r.statusCode ?? 0;
          res.writeHead(r.statusCode ?? 502, r.rawHeaders);
          r.on('data', (b: Buffer) => (span.bytesOut += b.byteLength));
          r.pipe(res);
          r.on('end', () => (span.end = this.now()));
        },
      );
      up.on('error', (e) => {
        span.end = this.now();
        if (!res.headersSent) res.writeHead(502);
        res.end(String(e));
      });
      req.on('data', (b: Buffer) => (span.bytesIn += b.byteLength));
      req.on('end', () => (span.bodyIn = this.now()));
      req.pipe(up);
    });
    server.on('upgrade', (req, socket, head) => {
      const up = net.connect(Number(to.port), to.hostname, () => {
        const lines = [`${req.method} ${req.url} HTTP/${req.httpVersion}`];
        for (let i = 0; i < req.rawHeaders.length; i += 2)
          lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
        up.write(`${lines.join('\r\n')}\r\n\r\n`);
        if (head.length > 0) up.write(head);
        socket.pipe(up).pipe(socket);
      });
      const end = (): void => {
        up.destroy();
        socket.destroy();
      };
      up.on('error', end);
      socket.on('error', end);
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    const port = (server.address() as net.AddressInfo).port;
    return {
      url: `http://127.0.0.1:${port}`,
      close: async () => {
        server.closeAllConnections();
        agent.destroy();
        await new Promise<void>((ok) => server.close(() => ok()));
      },
    };
  }

  /**
   * The bundles agent → proxy: how many, their sizes on the wire, and from the first one's
   * start to the last one's answer, how long none, one, two or more were on their way.
   */
  bundleSummary(): string {
    const b = this.spans.filter((r) => r.hop === 'agent→proxy' && r.path === '/v1/bundles' && r.end > 0);
    if (b.length === 0) return 'bundles: none';
    const ev = [...b.map((r) => ({ t: r.start, d: 1 })), ...b.map((r) => ({ t: r.end, d: -1 }))].sort(
      (x, y) => x.t - y.t || x.d - y.d,
    );
    const during = [0, 0, 0];
    let n = 0;
    let last = ev[0]?.t ?? 0;
    for (const e of ev) {
      during[Math.min(n, 2)]! += e.t - last;
      n += e.d;
      last = e.t;
    }
    const s = (ms: number): string => (ms / 1000).toFixed(2);
    return (
      `bundles: ${b.length} (${b.map((r) => (r.bytesIn / 1024).toFixed(0)).join(', ')} KiB); ` +
      `from the first sent to the last answered ${s(last - (ev[0]?.t ?? 0))} s: ` +
      `none on its way ${s(during[0]!)} s, one ${s(during[1]!)} s, two or more ${s(during[2]!)} s`
    );
  }

  /** The timeline as text: marks and requests in time order, then a CPU strip per process. */
  render(): string {
    const s = (ms: number): string => (ms / 1000).toFixed(2).padStart(6);
    const kib = (b: number): string => `${(b / 1024).toFixed(0)} KiB`;
    const lines: { t: number; text: string }[] = [];
    for (const m of this.marks) lines.push({ t: m.t, text: `${s(m.t)}  ·  ${m.what}` });
    for (const r of this.spans) {
      // Bodies of a few bytes (GETs, small JSON) are shown without their phases.
      lines.push({
        t: r.start,
        text:
          `${s(r.start)}  ${r.hop.padEnd(11)} ${r.method} ${r.path} → ${r.status || '…'}` +
          (r.bytesIn > 0 ? ` in ${kib(r.bytesIn)} by ${s(r.bodyIn).trim()}` : '') +
          ` head ${s(r.head).trim()} end ${s(r.end).trim()} (${((r.end - r.start) / 1000).toFixed(2)} s)`,
      });
    }
    lines.sort((a, b) => a.t - b.t);
    const out = lines.map((l) => l.text);
    out.push(this.bundleSummary());
    // CPU strip: one character per 100 ms slot, ' ' idle … '█' one full core (2: two cores).
    const glyph = (cores: number): string =>
      cores < 0.05
        ? '.'
        : cores < 0.35
          ? '░'
          : cores < 0.65
            ? '▒'
            : cores < 0.95
              ? '▓'
              : cores < 1.5
                ? '█'
                : '#';
    out.push(
      'CPU per 100 ms (. <5 %, ░ <35 %, ▒ <65 %, ▓ <95 %, █ one core, # more), 10 slots a second, ' +
        'on the same clock as the lines above (blank: not sampled yet):',
    );
    for (const [name, slots] of this.cpu) {
      const total = slots.reduce((a, x) => a + (x.cores * 100) / 1000, 0);
      let strip = ' '.repeat(Math.round((slots[0]?.t ?? 0) / 100));
      for (const x of slots) strip += glyph(x.cores);
      const busy = slots.filter((x) => x.cores >= 0.65).length;
      const idle = slots.filter((x) => x.cores < 0.05).length;
      out.push(
        `  ${name.padEnd(6)} ${total.toFixed(1)} CPU-s over ${slots.length} slots: ${busy} busy (≥65 %), ${idle} idle (<5 %)`,
      );
      for (let i = 0; i < strip.length; i += 100)
        out.push(`    ${((i / 10) | 0).toString().padStart(4)} s ${strip.slice(i, i + 100)}`);
    }
    return out.join('\n');
  }
}
