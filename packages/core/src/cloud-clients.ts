/**
 * The OAuth clients Weft signs in to Dropbox, Google Drive and OneDrive with, read in one
 * place for every entry point (`npm start`, `weft agent`, the desktop app): from the
 * environment, else from `$WEFT_HOME/clouds.json` (a JSON object of the same variable
 * names). A cloud without a client cannot be connected ("sign-in is not set up").
 *
 * Each value is checked; a malformed one is refused with an error naming the variable and
 * where it came from, and nothing starts. See docs/clouds.md for registering the apps.
 */
import { readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { type OAuthClientConfig, dropboxOAuth, googleOAuth, microsoftOAuth } from '@weft/providers/oauth';
import type { CloudProvider } from '@weft/ui-contract';

/** Every variable read here, in the order docs/clouds.md lists them. */
export const CLOUD_CLIENT_VARIABLES = [
  'WEFT_DROPBOX_APP_KEY',
  'WEFT_DROPBOX_REDIRECT_PORT',
  'WEFT_GOOGLE_CLIENT_ID',
  'WEFT_GOOGLE_CLIENT_SECRET',
  'WEFT_ONEDRIVE_CLIENT_ID',
  'WEFT_ONEDRIVE_TENANT',
  'WEFT_DROPBOX_AUTHORIZE_URL',
  'WEFT_DROPBOX_TOKEN_URL',
  'WEFT_GOOGLE_AUTHORIZE_URL',
  'WEFT_GOOGLE_TOKEN_URL',
  'WEFT_ONEDRIVE_AUTHORIZE_URL',
  'WEFT_ONEDRIVE_TOKEN_URL',
] as const;
export type CloudClientVariable = (typeof CLOUD_CLIENT_VARIABLES)[number];

export class CloudClientSettingsError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(message);
    this.name = 'CloudClientSettingsError';
  }
}

/** What a proxy needs to refresh the tokens a user gives it for sharing (`shares.oauth`). */
export interface ProxyOAuthClient {
  readonly clientId: string;
  readonly clientSecret?: string;
  /** Only when it is not the cloud's usual token endpoint (an override, another tenant). */
  readonly tokenUrl?: string;
}

export interface CloudClients {
  /** The agent's sign-in, per cloud (AgentOptions.oauth). */
  readonly oauth: Partial<Record<CloudProvider, OAuthClientConfig>>;
  /** The same clients as a proxy's `shares.oauth` config takes them. */
  readonly proxy: Partial<Record<CloudProvider, ProxyOAuthClient>>;
}

type Vars = Readonly<Record<string, string | undefined>>;

// Characters a client id or secret can hold (the consoles issue letters, digits, '-', '_',
// '.'); anything else — spaces, quotes, a pasted URL — is a copy-and-paste mistake.
const TOKEN_CHARS = /^[A-Za-z0-9._~-]{1,256}$/;
const GOOGLE_CLIENT_ID = /^[A-Za-z0-9-]{1,200}\.apps\.googleusercontent\.com$/;
const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
// Microsoft's tenant: common, organizations, consumers, a tenant GUID or a domain name.
const TENANT = /^[A-Za-z0-9][A-Za-z0-9.-]{0,99}$/;

/**
 * The port of Dropbox's loopback redirect. Dropbox compares redirect URIs exactly, port
 * included, so the agent must use the one registered in the App Console:
 * http://127.0.0.1:53139/callback (docs/clouds.md); WEFT_DROPBOX_REDIRECT_PORT changes it.
 * Google and Microsoft accept any loopback port, so theirs is a free one each time.
 */
export const DROPBOX_REDIRECT_PORT = 53139;

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * Read the cloud clients from variables (`env`, then `file` for what `env` does not set).
 * Empty values count as unset. Throws CloudClientSettingsError on a malformed value.
 */
export function cloudClientsFrom(env: Vars, file: Vars = {}, fileName = 'clouds.json'): CloudClients {
  const get = (name: CloudClientVariable): { value: string; where: string } | undefined => {
    const fromEnv = env[name];
    if (fromEnv !== undefined && fromEnv !== '') return { value: fromEnv, where: 'the environment' };
    const fromFile = file[name];
    if (fromFile !== undefined && fromFile !== '') return { value: fromFile, where: fileName };
    return undefined;
  };
  const bad = (name: string, where: string, what: string): never => {
    throw new CloudClientSettingsError(name, `${name} (from ${where}) ${what}`);
  };
  const token = (name: CloudClientVariable, what: string, shape?: RegExp, shapeText?: string) => {
    const v = get(name);
    if (!v) return undefined;
    if (v.value !== v.value.trim()) bad(name, v.where, `has spaces around it; set it to the ${what} alone`);
    if (!TOKEN_CHARS.test(v.value))
      bad(name, v.where, `is not a ${what}: only letters, digits, '-', '_', '.' and '~' (at most 256)`);
    if (shape && !shape.test(v.value)) bad(name, v.where, `is not a ${what}: ${shapeText}`);
    return v.value;
  };
  const endpoint = (name: CloudClientVariable): string | undefined => {
    const v = get(name);
    if (!v) return undefined;
    let url: URL;
    try {
      url = new URL(v.value);
    } catch {
      return bad(name, v.where, 'is not a URL');
    }
    const loopback = LOOPBACK_HOSTS.has(url.hostname);
    if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback))
      bad(name, v.where, 'must be an https: URL (http: only on 127.0.0.1 or localhost, for the emulators)');
    if (url.username || url.password || url.hash)
      bad(name, v.where, 'must not hold a user name, password or #fragment');
    return url.toString();
  };
  const portOf = (name: CloudClientVariable): number | undefined => {
    const v = get(name);
    if (!v) return undefined;
    if (!/^\d{1,5}$/.test(v.value) || Number(v.value) > 65535)
      bad(name, v.where, 'is not a port: a number from 1 to 65535 (0: any free port, for the emulators)');
    return Number(v.value);
  };
  /** Endpoint overrides go with a client; alone they are a mistake (nothing would use them). */
  const orphan = (names: readonly CloudClientVariable[], needs: string): void => {
    for (const n of names) {
      const v = get(n);
      if (v) bad(n, v.where, `is set but ${needs} is not: set both, or neither`);
    }
  };

  const oauth: Partial<Record<CloudProvider, OAuthClientConfig>> = {};
  const proxy: Partial<Record<CloudProvider, ProxyOAuthClient>> = {};
  const override = (
    config: OAuthClientConfig,
    authorizeUrl: string | undefined,
    tokenUrl: string | undefined,
  ): OAuthClientConfig => ({
    ...config,
    ...(authorizeUrl ? { authorizeUrl } : {}),
    ...(tokenUrl ? { tokenUrl } : {}),
  });

  const dropboxKey = token('WEFT_DROPBOX_APP_KEY', 'Dropbox app key');
  if (dropboxKey) {
    oauth.dropbox = {
      ...override(
        dropboxOAuth(dropboxKey),
        endpoint('WEFT_DROPBOX_AUTHORIZE_URL'),
        endpoint('WEFT_DROPBOX_TOKEN_URL'),
      ),
      redirectPort: portOf('WEFT_DROPBOX_REDIRECT_PORT') ?? DROPBOX_REDIRECT_PORT,
    };
    proxy.dropbox = { clientId: dropboxKey, ...otherTokenUrl(oauth.dropbox, dropboxOAuth(dropboxKey)) };
  } else
    orphan(
      ['WEFT_DROPBOX_REDIRECT_PORT', 'WEFT_DROPBOX_AUTHORIZE_URL', 'WEFT_DROPBOX_TOKEN_URL'],
      'WEFT_DROPBOX_APP_KEY',
    );

  const googleId = token(
    'WEFT_GOOGLE_CLIENT_ID',
    'Google OAuth client ID',
    GOOGLE_CLIENT_ID,
    'it ends in .apps.googleusercontent.com',
  );
  const googleSecret = token('WEFT_GOOGLE_CLIENT_SECRET', 'Google OAuth client secret');
  if (googleId) {
    // Google's token endpoint refuses a "Desktop app" client's code without its secret
    // (which, for installed apps, Google says is not treated as a secret).
    if (!googleSecret) {
      const v = get('WEFT_GOOGLE_CLIENT_ID');
      bad(
        'WEFT_GOOGLE_CLIENT_SECRET',
        v?.where ?? 'the environment',
        'is not set but WEFT_GOOGLE_CLIENT_ID is: a Google "Desktop app" client needs both',
      );
    }
    oauth.gdrive = override(
      googleOAuth(googleId, googleSecret),
      endpoint('WEFT_GOOGLE_AUTHORIZE_URL'),
      endpoint('WEFT_GOOGLE_TOKEN_URL'),
    );
    proxy.gdrive = {
      clientId: googleId,
      ...(googleSecret ? { clientSecret: googleSecret } : {}),
      ...otherTokenUrl(oauth.gdrive, googleOAuth(googleId, googleSecret)),
    };
  } else
    orphan(
      ['WEFT_GOOGLE_CLIENT_SECRET', 'WEFT_GOOGLE_AUTHORIZE_URL', 'WEFT_GOOGLE_TOKEN_URL'],
      'WEFT_GOOGLE_CLIENT_ID',
    );

  const onedriveId = token(
    'WEFT_ONEDRIVE_CLIENT_ID',
    'Microsoft Application (client) ID',
    GUID,
    'it is a GUID such as 00000000-0000-0000-0000-000000000000',
  );
  const tenant = token(
    'WEFT_ONEDRIVE_TENANT',
    'Microsoft tenant',
    TENANT,
    'use common, organizations, consumers, a tenant ID or a domain name',
  );
  if (onedriveId) {
    oauth.onedrive = override(
      microsoftOAuth(onedriveId, undefined, tenant ?? 'common'),
      endpoint('WEFT_ONEDRIVE_AUTHORIZE_URL'),
      endpoint('WEFT_ONEDRIVE_TOKEN_URL'),
    );
    proxy.onedrive = { clientId: onedriveId, ...otherTokenUrl(oauth.onedrive, microsoftOAuth(onedriveId)) };
  } else
    orphan(
      ['WEFT_ONEDRIVE_TENANT', 'WEFT_ONEDRIVE_AUTHORIZE_URL', 'WEFT_ONEDRIVE_TOKEN_URL'],
      'WEFT_ONEDRIVE_CLIENT_ID',
    );
  return { oauth, proxy };
}

/**
 * The proxy refreshes the tokens it is given with the client that issued them: at the same
 * token endpoint, which it is told only when it is not the cloud's usual one.
 */
function otherTokenUrl(used: OAuthClientConfig, usual: OAuthClientConfig): { tokenUrl?: string } {
  return used.tokenUrl !== usual.tokenUrl ? { tokenUrl: used.tokenUrl } : {};
}

/** `$WEFT_HOME/clouds.json` (WEFT_HOME defaults to ~/.weft). */
export function defaultCloudsFile(env: Vars = process.env): string {
  return nodePath.join(env.WEFT_HOME || nodePath.join(os.homedir(), '.weft'), 'clouds.json');
}

/** The variables in a clouds.json file: absent is none; anything but an object of strings is refused. */
export function readCloudsFile(file: string): Record<string, string> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new CloudClientSettingsError(file, `cannot read ${file}: ${(e as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new CloudClientSettingsError(file, `${file} is not JSON: ${(e as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new CloudClientSettingsError(file, `${file} must hold one JSON object of variable names`);
  const known = new Set<string>(CLOUD_CLIENT_VARIABLES);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(parsed)) {
    if (!known.has(k))
      throw new CloudClientSettingsError(
        k,
        `${file} names ${JSON.stringify(k)}, which is not a Weft cloud setting (${CLOUD_CLIENT_VARIABLES.join(', ')})`,
      );
    if (typeof v !== 'string') throw new CloudClientSettingsError(k, `${k} (from ${file}) must be a string`);
    out[k] = v;
  }
  return out;
}

/** The clouds' OAuth clients as every entry point reads them: environment, then clouds.json. */
export function loadCloudClients(env: Vars = process.env, file = defaultCloudsFile(env)): CloudClients {
  return cloudClientsFrom(env, readCloudsFile(file), file);
}
