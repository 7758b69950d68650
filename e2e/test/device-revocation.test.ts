/**
 * Removing a device (issue #14): the agent whose token was revoked stops syncing at once and
 * says so ("This computer was removed from your Weft account"), without a retry loop; the
 * user's other devices go on. Removing this computer from its own Accounts screen signs it
 * out: the token is revoked on the server and forgotten here, the files stay.
 */
import { existsSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { type RunningAgent, ProxyClient, memorySecretStore, startAgent } from '@weft/core';
import { afterEach, describe, expect, it } from 'vitest';
import { type Device, type TestProxy, enrol, startDevice, startTestProxy, tempDir } from '../src/harness.ts';

const REMOVED = 'This computer was removed from your Weft account';

async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

let proxy: TestProxy | undefined;
const devices: Device[] = [];
const agents: RunningAgent[] = [];
afterEach(async () => {
  for (const a of agents.splice(0)) await a.stop();
  for (const d of devices.splice(0)) await d.stop();
  await proxy?.close();
  proxy = undefined;
});

describe('device revocation', () => {
  it('aRevokedAgentStopsSyncingAndSaysSoWithoutRetrying', async () => {
    proxy = await startTestProxy('fs');
    const laptop = await startDevice(proxy, 'laptop');
    const phone = await startDevice(proxy, 'phone');
    devices.push(laptop, phone);
    await fsp.writeFile(nodePath.join(phone.folder, 'before.txt'), 'from the phone');
    await phone.engine.syncNow();
    await laptop.engine.syncNow();
    expect(await fsp.readFile(nodePath.join(laptop.folder, 'before.txt'), 'utf8')).toBe('from the phone');

    const { devices: list } = await laptop.client.listDevices();
    const phoneId = list.find((d) => d.name === 'phone')?.id ?? '';
    await laptop.client.revokeDevice(phoneId);

    // Without anything asked of it, the phone learns through its closed feed and stops.
    await until('the phone to show it was removed', () => phone.engine.getStatus().state === 'removed', 5000);
    expect(phone.engine.getStatus().error).toBe(REMOVED);

    // No retry loop: it makes no more requests, whatever happens in its folder.
    const requests = phone.client.requests;
    await fsp.writeFile(nodePath.join(phone.folder, 'after.txt'), 'never sent');
    phone.engine.markDirty(['']);
    await phone.engine.syncNow();
    await new Promise((r) => setTimeout(r, 600)); // three offline-retry periods (200 ms)
    expect(phone.client.requests).toBe(requests);
    expect(phone.engine.getStatus().state).toBe('removed');
    phone.engine.resume();
    expect(phone.engine.getStatus().state).toBe('removed');

    // The laptop goes on; the phone's later file never reached the server.
    await fsp.writeFile(nodePath.join(laptop.folder, 'laptop.txt'), 'still syncing');
    await laptop.engine.syncNow();
    expect(laptop.engine.getStatus().state).not.toBe('removed');
    const names = (await laptop.client.list('', true)).entries.map((e) => e.path).sort();
    expect(names).toEqual(['before.txt', 'laptop.txt']);
    // Its files stay on disk.
    expect(await fsp.readFile(nodePath.join(phone.folder, 'before.txt'), 'utf8')).toBe('from the phone');
  }, 30_000);

  it('removingThisComputerFromItsAccountsScreenSignsItOut', async () => {
    proxy = await startTestProxy('fs');
    const root = await tempDir('signout');
    const folder = nodePath.join(root, 'Weft');
    const stateDir = nodePath.join(root, 'state');
    const secrets = memorySecretStore();
    const agent = await startAgent({
      folder,
      stateDir,
      server: proxy.url,
      user: 'alice',
      deviceName: 'desk',
      adminToken: proxy.adminToken,
      secrets,
      watch: false,
      settleMs: 0,
      uiDir: root, // no renderer needed
    });
    agents.push(agent);
    const other = new ProxyClient({ baseUrl: proxy.url, token: await enrol(proxy, 'alice', 'tablet') });
    await fsp.writeFile(nodePath.join(folder, 'kept.txt'), 'stays here');
    await agent.engine.syncNow();

    const listed = await agent.ui.handlers.listDevices({});
    expect(listed.available).toBe(true);
    expect(listed.devices.map((d) => [d.name, d.current])).toEqual([
      ['desk', true],
      ['tablet', false],
    ]);
    const me = listed.devices.find((d) => d.current)?.id ?? '';
    const token = (await secrets.get('device-token')) ?? '';
    expect(token).not.toBe('');

    const after = await agent.ui.handlers.removeDevice({ id: me });
    expect(after.available).toBe(false);
    expect(agent.enrolled).toBe(false);
    expect(agent.ui.status().error).toMatch(/not connected to Weft storage/);
    // Forgotten here, refused there, files left alone.
    expect(await secrets.get('device-token')).toBeUndefined();
    expect(existsSync(nodePath.join(stateDir, 'device.json'))).toBe(false);
    const old = new ProxyClient({ baseUrl: proxy.url, token });
    await expect(old.whoami()).rejects.toMatchObject({ status: 401, code: 'DEVICE_REVOKED' });
    expect(await fsp.readFile(nodePath.join(folder, 'kept.txt'), 'utf8')).toBe('stays here');
    expect((await other.listDevices()).devices.map((d) => d.name)).toEqual(['tablet']);
    // And it can be connected again.
    await agent.ui.handlers.connectWeft({
      server: proxy.url,
      user: 'alice',
      deviceName: 'desk',
      enrolment: { kind: 'adminToken', adminToken: proxy.adminToken },
    });
    expect(agent.enrolled).toBe(true);
  }, 30_000);

  it('anAgentRemovedByAnotherDeviceCanBeConnectedAgain', async () => {
    proxy = await startTestProxy('fs');
    const root = await tempDir('removed');
    const secrets = memorySecretStore();
    const agent = await startAgent({
      folder: nodePath.join(root, 'Weft'),
      stateDir: nodePath.join(root, 'state'),
      server: proxy.url,
      user: 'alice',
      deviceName: 'desk',
      adminToken: proxy.adminToken,
      secrets,
      watch: false,
      settleMs: 0,
      uiDir: root,
    });
    agents.push(agent);
    await agent.engine.syncNow();
    const other = new ProxyClient({ baseUrl: proxy.url, token: await enrol(proxy, 'alice', 'tablet') });
    const desk = (await other.listDevices()).devices.find((d) => d.name === 'desk')?.id ?? '';
    await other.revokeDevice(desk);
    await until('the agent to show it was removed', () => agent.ui.status().state === 'removed', 5000);
    expect(agent.ui.status().error).toBe(REMOVED);
    const { accounts } = await agent.ui.handlers.listAccounts({});
    expect(accounts.find((a) => a.kind === 'weft')).toMatchObject({ state: 'error' });
    expect((await agent.ui.handlers.listDevices({})).available).toBe(false);
    await agent.ui.handlers.connectWeft({
      server: proxy.url,
      user: 'alice',
      deviceName: 'desk again',
      enrolment: { kind: 'adminToken', adminToken: proxy.adminToken },
    });
    expect(agent.enrolled).toBe(true);
    await agent.engine.syncNow();
    expect(agent.ui.status().state).not.toBe('removed');
    expect((await other.listDevices()).devices.map((d) => d.name)).toEqual(['tablet', 'desk again']);
  }, 30_000);
});
