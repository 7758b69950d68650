/**
 * The one typed API between the UI (renderer) and whatever runs the engine: the Electron
 * main process over IPC, or `weft agent` over HTTP + server-sent events. Every message is
 * validated with zod on both sides; channel names carry the `weft:` prefix.
 *
 * Pure data and zod only: nothing platform-specific may be imported here.
 */
import { z } from 'zod';
import { CostViewSchema } from './cost.ts';
import { FolderStateSchema } from './folder-state.ts';
import { SyncedFolderSchema, folderMethods } from './folders.ts';
import { versionMethods } from './versions.ts';
import { storageHealthMethods } from './storage-health.ts';

export { FolderStateSchema };

export const CHANNEL_PREFIX = 'weft:';
/** IPC/event name for pushed status updates. */
export const STATUS_EVENT = `${CHANNEL_PREFIX}event:status`;

/** The user's Weft storage: bytes used and the quota (null: unlimited), as last read. */
export const StorageUsageSchema = z.object({
  usedBytes: z.number().min(0),
  limitBytes: z.number().min(0).nullable(),
  checkedAtMs: z.number(),
  /** While the server refuses uploads for lack of space. */
  full: z
    .object({
      sinceMs: z.number(),
      /** What the refused upload needed beyond what was left. */
      neededBytes: z.number().min(0),
      /** When Weft looks again by itself. */
      nextCheckMs: z.number(),
    })
    .optional(),
});
export type StorageUsage = z.infer<typeof StorageUsageSchema>;

export const FolderStatusSchema = z.object({
  folder: z.string(),
  state: FolderStateSchema,
  pausedUntilMs: z.number().optional(),
  error: z.string().optional(),
  files: z.number().int().min(0),
  pendingOperations: z.number().int().min(0),
  transfers: z.array(
    z.object({
      path: z.string(),
      direction: z.enum(['up', 'down']),
      bytesDone: z.number().min(0),
      bytesTotal: z.number().min(0),
      rate: z.number().min(0),
      etaSeconds: z.number().min(0).optional(),
      /** The synced folder's name in Weft storage (absent: the main folder). */
      folder: z.string().optional(),
    }),
  ),
  recent: z.array(
    z.object({
      atMs: z.number(),
      kind: z.enum(['added', 'uploaded', 'downloaded', 'deleted', 'moved', 'conflicted', 'error']),
      path: z.string(),
      detail: z.string().optional(),
      folder: z.string().optional(),
    }),
  ),
  conflicts: z.array(
    z.object({ path: z.string(), copyPath: z.string(), atMs: z.number(), folder: z.string().optional() }),
  ),
  savings: z.object({
    deltaBytesSaved: z.number().min(0),
    requestsSavedByBundling: z.number().min(0),
    operationsEliminated: z.number().min(0),
  }),
  bytesUploaded: z.number().min(0),
  bytesDownloaded: z.number().min(0),
  warnings: z.array(z.string()),
  /**
   * Every synced folder with its own state (the main one first); the rest of this status is
   * all of them together. Absent: only the main folder.
   */
  folders: z.array(SyncedFolderSchema).optional(),
  /**
   * Entries stored on this computer under another name than on the server, because its
   * filesystem cannot hold the remote name (`CON.txt` → `CON＿.txt` on Windows): the remote
   * path, the local name, and the notice in words.
   */
  storedAs: z.array(z.object({ path: z.string(), localName: z.string(), notice: z.string() })).optional(),
  /** Set while the engine holds a pass that would delete many files, waiting for an answer. */
  massDeletePending: z.boolean().optional(),
  /** Weft storage used and its quota; absent until the agent has read it. */
  storage: StorageUsageSchema.optional(),
  /**
   * The Weft server instance this computer talks to: several instances can serve one Weft
   * storage (docs/deployment.md), and the agent moves to another when its own stops
   * answering. Absent before enrolment.
   */
  server: z
    .object({
      url: z.string(),
      /** The instance's id, when the server named it. */
      id: z.string().optional(),
      /** Round trip to it as last measured, ms. */
      rttMs: z.number().min(0).optional(),
      /** Instances known, and how many of them answer. */
      instances: z.number().int().min(0),
      up: z.number().int().min(0),
      /** Moves to another instance because this one stopped answering (since the agent started). */
      failovers: z.number().int().min(0),
    })
    .optional(),
  /**
   * How bundles of small files went up (CoCloud Eq. 3–4 with hysteresis): bundles sent
   * deflated and raw, and the last choice; absent until the first bundle.
   */
  uploadCompression: z
    .object({
      deflated: z.number().int().min(0),
      raw: z.number().int().min(0),
      last: z.enum(['deflate', 'raw']),
    })
    .optional(),
});
export type FolderStatusDto = z.infer<typeof FolderStatusSchema>;

export const SettingsSchema = z.object({
  /** KiB/s; 0 = unlimited. */
  uploadLimitKiBps: z.number().int().min(0).max(10_000_000),
  downloadLimitKiBps: z.number().int().min(0).max(10_000_000),
  ignorePatterns: z.array(z.string().min(1).max(500)).max(500),
  /** Ask before one pass deletes more than this share of files (percent)… */
  massDeletePercent: z.number().int().min(1).max(100),
  /** …and more than this many files. */
  massDeleteCount: z.number().int().min(10).max(10_000_000),
  startAtLogin: z.boolean(),
  /** Replaced and deleted files stay in the local trash this many days… */
  trashKeepDays: z.number().int().min(1).max(3650),
  /** …and the trash keeps at most this many MiB, oldest going first (0 = min(10 % of the disk, 10 GiB)). */
  trashLimitMiB: z.number().int().min(0).max(1_000_000_000),
});
export type Settings = z.infer<typeof SettingsSchema>;

export const DEFAULT_SETTINGS: Settings = {
  uploadLimitKiBps: 0,
  downloadLimitKiBps: 0,
  ignorePatterns: [],
  massDeletePercent: 50,
  massDeleteCount: 1000,
  startAtLogin: false,
  trashKeepDays: 30,
  trashLimitMiB: 0,
};

export const CloudProviderSchema = z.enum(['dropbox', 'gdrive', 'onedrive']);
export type CloudProvider = z.infer<typeof CloudProviderSchema>;
export const AccountKindSchema = z.enum(['weft', 'dropbox', 'gdrive', 'onedrive']);
export type AccountKind = z.infer<typeof AccountKindSchema>;

export const AccountSchema = z.object({
  kind: AccountKindSchema,
  state: z.enum(['connected', 'connecting', 'error']),
  /** Who or where: the server URL and user for Weft storage, the provider name for clouds. */
  label: z.string(),
  connectedAtMs: z.number().optional(),
  detail: z.string().optional(),
});
export type Account = z.infer<typeof AccountSchema>;

export const StorageSplitSchema = z.object({
  filesystemTierBytes: z.number().min(0),
  filesystemTierFiles: z.number().int().min(0),
  objectTierBytes: z.number().min(0),
  objectTierFiles: z.number().int().min(0),
});
export type StorageSplit = z.infer<typeof StorageSplitSchema>;

export const ShareMemberSchema = z.object({
  name: z.string(),
  /** Which cloud this member keeps the folder in. */
  cloud: AccountKindSchema,
  role: z.enum(['owner', 'member']),
  /** This member is you. */
  you: z.boolean(),
  /**
   * Whether the share's mirror can write to this member's folder (absent: the server did
   * not say). While 'unavailable', the changes for them wait, in order, and are applied
   * when their cloud takes writes again; nothing is lost.
   */
  availability: z
    .object({
      state: z.enum(['available', 'unavailable']),
      /** full: out of space; unauthorised: the connection must be made again; failing: errors. */
      cause: z.enum(['full', 'unauthorised', 'failing']).optional(),
      sinceMs: z.number().optional(),
      /** Changes waiting for this member's folder. */
      waiting: z.number().int().min(0),
      /** In words, e.g. "unavailable since 14:02 — account full; 37 changes waiting". */
      summary: z.string(),
      /** The cloud's own message (only for your own folder). */
      detail: z.string().optional(),
    })
    .optional(),
});
export type ShareMember = z.infer<typeof ShareMemberSchema>;
export const ShareSchema = z.object({
  id: z.string(),
  name: z.string(),
  /** Your role in the share. */
  role: z.enum(['owner', 'member']),
  /** Where you keep it: your cloud and the folder in it (when the server says). */
  cloud: AccountKindSchema.optional(),
  folder: z.string().optional(),
  members: z.array(ShareMemberSchema),
  /** The server's mirror for this share: 'seeding' | 'syncing' | 'idle' | 'error', in words. */
  state: z.string(),
  /** Plain-language problem, if the last round failed. */
  error: z.string().optional(),
});
export type Share = z.infer<typeof ShareSchema>;
export const SharingSchema = z.object({
  available: z.boolean(),
  /** Why sharing cannot be used (shown as is). */
  reason: z.string().optional(),
  shares: z.array(ShareSchema),
});
export type Sharing = z.infer<typeof SharingSchema>;
export const InviteSchema = z.object({
  shareId: z.string(),
  /** The link to send (`weft://share/<token>`); works once. */
  invite: z.string(),
  expiresMs: z.number(),
});
export type Invite = z.infer<typeof InviteSchema>;
/** What an invitation leads to, before accepting it. */
export const InvitePreviewSchema = z.object({
  name: z.string(),
  owner: z.string(),
  invitedBy: z.string(),
  expiresMs: z.number(),
  members: z.array(z.object({ name: z.string(), cloud: AccountKindSchema })),
});
export type InvitePreview = z.infer<typeof InvitePreviewSchema>;

/** One of your Weft devices (computers enrolled with your Weft storage account). */
export const DeviceSchema = z.object({
  id: z.string(),
  name: z.string(),
  createdMs: z.number(),
  /** Last time the server heard from it (to the minute); absent: not since it was added. */
  lastSeenMs: z.number().optional(),
  /** This computer. */
  current: z.boolean(),
});
export type Device = z.infer<typeof DeviceSchema>;
export const DevicesSchema = z.object({
  /** False before this computer is connected to Weft storage, or when the list cannot be had. */
  available: z.boolean(),
  /** Why the list is not available (shown as is). */
  reason: z.string().optional(),
  devices: z.array(DeviceSchema),
});
export type Devices = z.infer<typeof DevicesSchema>;

/**
 * Selective sync: one folder of the Weft storage as Settings lists it. `selected`: kept on
 * this device. `state` (only for a folder chosen by its own entry): `leaving` — its pending
 * changes upload, then its local copy goes; `excluded` — not on this device; `including` —
 * being downloaded again.
 */
export const SelectiveFolderSchema = z.object({
  path: z.string(),
  name: z.string(),
  selected: z.boolean(),
  state: z.enum(['leaving', 'excluded', 'including']).optional(),
});
export type SelectiveFolder = z.infer<typeof SelectiveFolderSchema>;
export const SelectiveSyncSchema = z.object({
  /** False before this computer is connected to Weft storage. */
  available: z.boolean(),
  reason: z.string().optional(),
  /** The folder whose subfolders `folders` lists ('' = the top). */
  parent: z.string(),
  folders: z.array(SelectiveFolderSchema),
  /** Every folder left out of this device (with its state), wherever it is. */
  excluded: z.array(z.object({ path: z.string(), state: z.enum(['leaving', 'excluded', 'including']) })),
  /** The server could not be reached: `folders` comes from what this device knows. */
  offline: z.boolean(),
});
export type SelectiveSync = z.infer<typeof SelectiveSyncSchema>;

const Empty = z.object({}).strict();

/** Method name → input and output schemas. Adding a method here types both sides. */
export const api = {
  getStatus: { input: Empty, output: FolderStatusSchema },
  pause: {
    input: z.object({ duration: z.enum(['1h', 'untilRestart']) }).strict(),
    output: FolderStatusSchema,
  },
  resume: { input: Empty, output: FolderStatusSchema },
  /** Run a pass now (also the "retry" of an error). */
  syncNow: { input: Empty, output: FolderStatusSchema },
  resolveConflict: {
    input: z
      .object({
        path: z.string().min(1).max(4096),
        keep: z.enum(['mine', 'theirs', 'both']),
        /** The conflict's `folder` (absent: the main folder). */
        folder: z.string().max(200).optional(),
      })
      .strict(),
    output: FolderStatusSchema,
  },
  resolveMassDelete: {
    input: z.object({ answer: z.enum(['delete', 'restore']) }).strict(),
    output: FolderStatusSchema,
  },
  getStorage: { input: Empty, output: StorageSplitSchema },
  /** This month's bill of Weft storage, so far and projected, and bytes held over time. */
  getCost: { input: Empty, output: CostViewSchema },
  getSettings: { input: Empty, output: SettingsSchema },
  setSettings: { input: SettingsSchema.partial().strict(), output: SettingsSchema },
  /** Selective sync: the server's folders under `parent` and which of them this device keeps. */
  getSelectiveSync: {
    input: z.object({ parent: z.string().max(4096).optional() }).strict(),
    output: SelectiveSyncSchema,
  },
  /**
   * Leave out exactly these folders (the whole list; [] keeps everything). Applies at once:
   * a folder left out uploads its pending changes, then its local copy goes (nothing is
   * deleted from Weft storage); a folder taken back is downloaded.
   */
  setSelectiveSync: {
    input: z
      .object({
        excluded: z.array(z.string().min(1).max(4096)).max(10_000),
        parent: z.string().max(4096).optional(),
      })
      .strict(),
    output: SelectiveSyncSchema,
  },
  listAccounts: { input: Empty, output: z.object({ accounts: z.array(AccountSchema) }) },
  /** Starts OAuth (PKCE, loopback redirect); the UI opens authorizeUrl in the browser. */
  connectCloud: {
    input: z.object({ provider: CloudProviderSchema }).strict(),
    output: z.object({ authorizeUrl: z.string().url() }),
  },
  disconnect: {
    input: z.object({ kind: AccountKindSchema }).strict(),
    output: z.object({ accounts: z.array(AccountSchema) }),
  },
  /**
   * Enrol this device with a Weft storage server (first run): an admin token or an invite
   * code buys a device token, which goes to the secret store, never a plain file.
   */
  connectWeft: {
    input: z
      .object({
        server: z
          .string()
          .url()
          .max(2048)
          .refine((u) => /^https?:\/\//.test(u), 'an http(s) address'),
        user: z.string().min(1).max(64).optional(),
        deviceName: z.string().min(1).max(60).optional(),
        enrolment: z.discriminatedUnion('kind', [
          z.object({ kind: z.literal('adminToken'), adminToken: z.string().min(1).max(4096) }).strict(),
          z.object({ kind: z.literal('invite'), invite: z.string().min(1).max(4096) }).strict(),
        ]),
      })
      .strict(),
    output: z.object({ accounts: z.array(AccountSchema) }),
  },
  /** This computer and your other devices on Weft storage. */
  listDevices: { input: Empty, output: DevicesSchema },
  /**
   * Remove a device from your account: its access ends at once and it stops syncing.
   * Removing this computer signs it out (its files stay on disk).
   */
  removeDevice: { input: z.object({ id: z.string().min(1).max(64) }).strict(), output: DevicesSchema },
  getSharing: { input: Empty, output: SharingSchema },
  /** Share a folder of one of your clouds; answers with a first invitation to send. */
  shareFolder: {
    input: z
      .object({
        name: z.string().trim().min(1).max(200),
        cloud: AccountKindSchema,
        folder: z.string().max(4096),
      })
      .strict(),
    output: InviteSchema,
  },
  /** A new single-use invitation for a share you are in. */
  createInvite: { input: z.object({ id: z.string().min(1).max(200) }).strict(), output: InviteSchema },
  /** Look at an invitation without using it up. */
  previewInvite: {
    input: z.object({ invite: z.string().min(1).max(4096) }).strict(),
    output: InvitePreviewSchema,
  },
  acceptInvite: {
    input: z
      .object({ invite: z.string().min(1).max(4096), cloud: AccountKindSchema, folder: z.string().max(4096) })
      .strict(),
    output: SharingSchema,
  },
  leaveShare: { input: z.object({ id: z.string().min(1).max(200) }).strict(), output: SharingSchema },
  /**
   * Open the synced folder in the file manager of the computer Weft runs on (the tray
   * popover's "Open folder"); `opened: false` where it cannot (no desktop to open it on).
   */
  openFolder: { input: Empty, output: z.object({ opened: z.boolean() }) },
  ...versionMethods,
  ...storageHealthMethods,
  ...folderMethods,
} as const;

export type ApiMethod = keyof typeof api;
export type ApiInput<M extends ApiMethod> = z.input<(typeof api)[M]['input']>;
export type ApiOutput<M extends ApiMethod> = z.output<(typeof api)[M]['output']>;

/** The implementation side (Electron main or the agent). Inputs arrive already validated. */
export type ApiHandlers = {
  [M in ApiMethod]: (input: z.output<(typeof api)[M]['input']>) => Promise<ApiOutput<M>>;
};

/** The client side: one typed method per API method, plus the status stream. */
export type WeftClient = {
  [M in ApiMethod]: (input: ApiInput<M>) => Promise<ApiOutput<M>>;
} & {
  onStatus(listener: (status: FolderStatusDto) => void): () => void;
};

export const ApiErrorCodeSchema = z.enum(['bad-request', 'unknown-method', 'unavailable', 'failed']);
export type ApiErrorCode = z.infer<typeof ApiErrorCodeSchema>;

export class ApiError extends Error {
  constructor(
    readonly code: ApiErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export const ResponseSchema = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), value: z.unknown() }),
  z.object({ ok: z.literal(false), error: z.object({ code: ApiErrorCodeSchema, message: z.string() }) }),
]);
export type ApiResponse = z.infer<typeof ResponseSchema>;

export function isApiMethod(name: string): name is ApiMethod {
  return Object.prototype.hasOwnProperty.call(api, name);
}

export function channelOf(method: ApiMethod): string {
  return `${CHANNEL_PREFIX}${method}`;
}

/** The method a prefixed channel names, or undefined for anything else. */
export function methodOfChannel(channel: string): ApiMethod | undefined {
  if (!channel.startsWith(CHANNEL_PREFIX)) return undefined;
  const name = channel.slice(CHANNEL_PREFIX.length);
  return isApiMethod(name) ? name : undefined;
}

function describeZod(e: z.ZodError): string {
  return e.issues.map((i) => `${i.path.join('.') || '(input)'}: ${i.message}`).join('; ');
}

/**
 * Server side of every transport: validate the input, run the handler, validate the
 * output, and wrap the result (errors become `{ok: false}` with a code, never a throw).
 */
export async function dispatch(handlers: ApiHandlers, method: string, input: unknown): Promise<ApiResponse> {
  if (!isApiMethod(method)) return { ok: false, error: { code: 'unknown-method', message: method } };
  const spec = api[method];
  const parsed = spec.input.safeParse(input ?? {});
  if (!parsed.success)
    return { ok: false, error: { code: 'bad-request', message: describeZod(parsed.error) } };
  try {
    const run = handlers[method] as (i: unknown) => Promise<unknown>;
    const value = spec.output.parse(await run(parsed.data));
    return { ok: true, value };
  } catch (e) {
    if (e instanceof ApiError) return { ok: false, error: { code: e.code, message: e.message } };
    return { ok: false, error: { code: 'failed', message: e instanceof Error ? e.message : String(e) } };
  }
}

/** Client side: check the envelope and the value; throw ApiError on failures. */
export function unwrapResponse<M extends ApiMethod>(method: M, raw: unknown): ApiOutput<M> {
  const r = ResponseSchema.safeParse(raw);
  if (!r.success) throw new ApiError('failed', `malformed answer to ${method}: ${describeZod(r.error)}`);
  if (!r.data.ok) throw new ApiError(r.data.error.code, r.data.error.message);
  const v = api[method].output.safeParse(r.data.value);
  if (!v.success) throw new ApiError('failed', `unexpected answer to ${method}: ${describeZod(v.error)}`);
  return v.data as ApiOutput<M>;
}

/** Transport: send one validated request, get back the raw envelope. */
export type RawCall = (method: ApiMethod, input: unknown) => Promise<unknown>;

/** A typed service proxy over any transport (VS Code's ProxyChannel idea). */
export function createClient(
  call: RawCall,
  subscribe: (listener: (raw: unknown) => void) => () => void,
): WeftClient {
  const client: Record<string, unknown> = {};
  for (const method of Object.keys(api) as ApiMethod[]) {
    client[method] = async (input: unknown) => {
      const checked = api[method].input.safeParse(input ?? {});
      if (!checked.success) throw new ApiError('bad-request', describeZod(checked.error));
      return unwrapResponse(method, await call(method, checked.data));
    };
  }
  client.onStatus = (listener: (s: FolderStatusDto) => void) =>
    subscribe((raw) => {
      const s = FolderStatusSchema.safeParse(raw);
      if (s.success) listener(s.data);
    });
  return Object.freeze(client) as WeftClient;
}
