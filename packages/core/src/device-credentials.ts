/**
 * This device's enrolment with a Weft storage server: `<stateDir>/device.json` holds what
 * is not secret (server, user, device name); the device token lives in the secret store
 * under `device-token`. A device.json from before the secret store (token inline) is
 * migrated on first read: the token moves into the store and leaves the file.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { ProxyClient } from './remote/proxy-client.ts';
import type { SecretStore } from './secret-store.ts';

export interface DeviceCredentials {
  readonly server: string;
  readonly user: string;
  readonly deviceName: string;
  readonly token: string;
}

export const DEVICE_TOKEN_SECRET = 'device-token';
const DEVICE_FILE = 'device.json';

export async function loadDevice(
  stateDir: string,
  secrets: SecretStore,
): Promise<DeviceCredentials | undefined> {
  const file = nodePath.join(stateDir, DEVICE_FILE);
  let d: Record<string, unknown>;
  try {
    const raw: unknown = JSON.parse(await fsp.readFile(file, 'utf8'));
    if (typeof raw !== 'object' || raw === null) return undefined;
    d = raw as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (typeof d.server !== 'string' || typeof d.user !== 'string') return undefined;
  const deviceName = typeof d.deviceName === 'string' ? d.deviceName : os.hostname().slice(0, 60);
  let token = await secrets.get(DEVICE_TOKEN_SECRET);
  if (typeof d.token === 'string') {
    // Legacy plain-file token: into the secret store, out of the file.
    token = d.token;
    await saveDevice(stateDir, secrets, { server: d.server, user: d.user, deviceName, token });
  }
  return token === undefined ? undefined : { server: d.server, user: d.user, deviceName, token };
}

export async function saveDevice(
  stateDir: string,
  secrets: SecretStore,
  device: DeviceCredentials,
): Promise<void> {
  await fsp.mkdir(stateDir, { recursive: true, mode: 0o700 });
  await secrets.set(DEVICE_TOKEN_SECRET, device.token);
  const file = nodePath.join(stateDir, DEVICE_FILE);
  const tmp = `${file}.tmp`;
  const { server, user, deviceName } = device;
  await fsp.writeFile(tmp, JSON.stringify({ server, user, deviceName }, null, 2), { mode: 0o600 });
  await fsp.rename(tmp, file);
}

/** Enrol with a server (admin token or invite code) and keep the result. */
export async function enrolDevice(
  stateDir: string,
  secrets: SecretStore,
  request: { server: string; user: string; deviceName: string; adminToken?: string; invite?: string },
): Promise<DeviceCredentials> {
  const server = request.server.replace(/\/+$/, '');
  const enrolled = await ProxyClient.enrol(server, {
    user: request.user,
    deviceName: request.deviceName,
    ...(request.adminToken ? { adminToken: request.adminToken } : {}),
    ...(request.invite ? { invite: request.invite } : {}),
  });
  const device = { server, user: enrolled.user, deviceName: request.deviceName, token: enrolled.token };
  await saveDevice(stateDir, secrets, device);
  return device;
}

/** Forget this device's enrolment (signed out or removed): device.json and the token go. */
export async function forgetDevice(stateDir: string, secrets: SecretStore): Promise<void> {
  await secrets.delete(DEVICE_TOKEN_SECRET);
  await fsp.rm(nodePath.join(stateDir, DEVICE_FILE), { force: true });
}
