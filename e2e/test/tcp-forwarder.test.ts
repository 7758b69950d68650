/**
 * The partition tool of the cluster tests (src/tcp-forwarder.ts) against an echo server:
 * bytes pass; cut, nothing passes either way and nothing is closed; healed, what waited
 * arrives; a far end that gave up during the cut shows as a closed connection once healed.
 */
import * as net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TcpForwarder } from '../src/tcp-forwarder.ts';

describe('tcp forwarder', () => {
  let echo: net.Server;
  let fwd: TcpForwarder;

  beforeAll(async () => {
    echo = net.createServer((s) => s.pipe(s));
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
    fwd = await TcpForwarder.start('127.0.0.1', (echo.address() as net.AddressInfo).port);
  });
  afterAll(async () => {
    await fwd.close();
    await new Promise((r) => echo.close(r));
  });

  const connect = async (): Promise<{ s: net.Socket; got: () => string; closed: () => boolean }> => {
    const s = net.connect(fwd.port, '127.0.0.1');
    let data = '';
    let closed = false;
    s.on('data', (b: Buffer) => (data += b.toString()));
    s.on('close', () => (closed = true));
    s.on('error', () => undefined);
    await new Promise((r) => s.once('connect', r));
    return { s, got: () => data, closed: () => closed };
  };
  const until = async (f: () => boolean): Promise<void> => {
    for (let i = 0; i < 200 && !f(); i++) await new Promise((r) => setTimeout(r, 10));
  };
  const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

  it('cutHoldsBytesBothWaysAndHealingDeliversThem', async () => {
    const c = await connect();
    c.s.write('one');
    await until(() => c.got() === 'one');
    expect(c.got()).toBe('one');
    fwd.cut();
    c.s.write('two');
    const late = await connect(); // accepted, but not forwarded while cut
    late.s.write('three');
    await pause(200);
    expect(c.got()).toBe('one');
    expect(late.got()).toBe('');
    expect(c.closed() || late.closed()).toBe(false);
    fwd.restore();
    await until(() => c.got() === 'onetwo' && late.got() === 'three');
    expect([c.got(), late.got()]).toEqual(['onetwo', 'three']);
    c.s.destroy();
    late.s.destroy();
  });

  it('aFarEndThatGaveUpDuringTheCutIsClosedOnHealing', async () => {
    const c = await connect();
    fwd.cut('blackhole', 50);
    await pause(200);
    expect(c.closed()).toBe(false);
    fwd.restore();
    await until(c.closed);
    expect(c.closed()).toBe(true);
  });
});
