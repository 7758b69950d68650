/**
 * JSON messages of the share API (cross-cloud shared folders, DESIGN §5; routes in
 * docs/formats/api.md "Shares"): connected provider accounts, shares, invitations,
 * members and the mirror's progress. The proxy validates requests with these schemas and
 * publishes them in /openapi.json; clients validate responses with them.
 *
 * Credentials go one way only: a client sends the tokens of a provider account once
 * (`ConnectAccountRequest`); no response ever contains them.
 */
import { z } from 'zod/v4';
import { EntryPath, UserId } from './api.ts';

const Ms = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const Count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

/** The clouds a share member can keep their replica in. 'weft' = the user's Weft storage. */
export const CloudKind = z.enum(['weft', 'dropbox', 'gdrive', 'onedrive']).meta({ id: 'CloudKind' });
export type CloudKind = z.infer<typeof CloudKind>;
/** The clouds an account can be connected for (Weft storage needs no account). */
export const ProviderKind = z.enum(['dropbox', 'gdrive', 'onedrive']).meta({ id: 'ProviderKind' });
export type ProviderKind = z.infer<typeof ProviderKind>;

export const AccountId = z.string().regex(/^acc_[0-9a-f]{16}$/, 'account id: acc_ + 16 hex digits');
export const ShareId = z.uuid();
/** An invitation token as created by the server (base64url of 32 random bytes). */
export const ShareInviteToken = z.string().regex(/^[A-Za-z0-9_-]{43}$/, 'a share invitation token');

// ---------------------------------------------------------------- provider accounts

/** The result of the provider's OAuth flow (the desktop app runs it; see providers/oauth). */
export const ProviderTokens = z
  .object({
    accessToken: z.string().min(1).max(8192),
    refreshToken: z.string().min(1).max(8192).optional(),
    /** When the access token stops working, ms since the epoch. */
    expiresAtMs: Ms.optional(),
    scope: z.string().max(2048).optional(),
  })
  .meta({ id: 'ProviderTokens' });
export type ProviderTokens = z.infer<typeof ProviderTokens>;

export const ConnectAccountRequest = z
  .object({
    provider: ProviderKind,
    /** How the user recognises the account, e.g. the e-mail address. */
    label: z.string().trim().min(1).max(200),
    tokens: ProviderTokens,
  })
  .meta({ id: 'ConnectAccountRequest' });
export type ConnectAccountRequest = z.infer<typeof ConnectAccountRequest>;

/** A connected account as the API shows it: never its tokens. */
export const ProviderAccount = z
  .object({
    id: AccountId,
    provider: ProviderKind,
    label: z.string(),
    connectedMs: Ms,
  })
  .meta({ id: 'ProviderAccount' });
export type ProviderAccount = z.infer<typeof ProviderAccount>;

export const AccountsResponse = z
  .object({ accounts: z.array(ProviderAccount) })
  .meta({ id: 'AccountsResponse' });
export type AccountsResponse = z.infer<typeof AccountsResponse>;

export const AccountParams = z.object({ id: AccountId });

// ---------------------------------------------------------------- shares

/**
 * Where a member keeps their replica: a folder of their Weft namespace, or a folder of one
 * of their connected accounts (a named folder, never a whole namespace or account). The folder must exist when a share is created from it; when
 * accepting, it is created if missing (files already in it are merged, conflicts kept).
 */
export const ReplicaChoice = z
  .discriminatedUnion('cloud', [
    z.object({ cloud: z.literal('weft'), root: EntryPath }),
    z.object({ cloud: z.literal('account'), accountId: AccountId, root: EntryPath }),
  ])
  .meta({ id: 'ReplicaChoice' });
export type ReplicaChoice = z.infer<typeof ReplicaChoice>;

export const CreateShareRequest = z
  .object({
    name: z.string().trim().min(1).max(200),
    replica: ReplicaChoice,
  })
  .meta({ id: 'CreateShareRequest' });
export type CreateShareRequest = z.infer<typeof CreateShareRequest>;

/** A joining member's initial seeding: log entries applied of those pending when it joined. */
export const SeedingProgress = z
  .object({
    applied: Count,
    total: Count,
    done: z.boolean(),
  })
  .meta({ id: 'SeedingProgress' });
export type SeedingProgress = z.infer<typeof SeedingProgress>;

/**
 * A member's replica as the share's mirror sees it. 'unavailable': its cloud refuses writes
 * (or reads) — 'full' (out of space), 'unauthorised' (the connection was revoked or
 * expired), 'failing' (server errors, network); the changes for it wait, in order, in its
 * outage log and are applied when it takes writes again (tried again with a growing pause,
 * at most every 10 minutes). The other members go on meanwhile.
 */
export const ReplicaAvailability = z
  .object({
    state: z.enum(['available', 'unavailable']),
    /** Only when unavailable. */
    cause: z.enum(['full', 'unauthorised', 'failing']).optional(),
    /** When it became unavailable. */
    sinceMs: Ms.optional(),
    /** When it is tried again. */
    nextTryMs: Ms.optional(),
    /** The cloud's last error message; only for the caller's own membership. */
    error: z.string().optional(),
    /** Changes not yet applied to this replica (its outage log while unavailable). */
    waiting: Count,
  })
  .meta({ id: 'ReplicaAvailability' });
export type ReplicaAvailability = z.infer<typeof ReplicaAvailability>;

export const ShareMemberInfo = z
  .object({
    member: UserId,
    role: z.enum(['owner', 'member']),
    /** Which cloud this member's replica is on. */
    cloud: CloudKind,
    /** The account's label; only for the caller's own membership. */
    accountLabel: z.string().optional(),
    /** The replica's folder in that cloud; only for the caller's own membership. */
    root: EntryPath.optional(),
    joinedMs: Ms,
    /** Present while (and after) this member's folder is seeded from the share. */
    seeding: SeedingProgress.optional(),
    /** Whether the mirror can write to this member's folder (see ReplicaAvailability). */
    replica: ReplicaAvailability.optional(),
  })
  .meta({ id: 'ShareMemberInfo' });
export type ShareMemberInfo = z.infer<typeof ShareMemberInfo>;

/** What the proxy's mirror engine is doing for a share. */
export const ShareSyncStatus = z
  .object({
    /**
     * 'seeding': a member joined and their folder is being filled; 'syncing': changes are
     * being applied; 'idle': every replica holds the same tree as far as the log knows;
     * 'error': the last round failed (see lastError; it is retried).
     */
    state: z.enum(['seeding', 'syncing', 'idle', 'error']),
    /** Log entries not yet applied to every replica. */
    pending: Count,
    /** Log entries applied since the proxy started serving the share. */
    applied: Count,
    conflicts: Count,
    lastRoundMs: Ms.optional(),
    lastError: z.string().optional(),
  })
  .meta({ id: 'ShareSyncStatus' });
export type ShareSyncStatus = z.infer<typeof ShareSyncStatus>;

export const ShareInfo = z
  .object({
    id: ShareId,
    name: z.string(),
    owner: UserId,
    createdMs: Ms,
    /** The caller's role. */
    role: z.enum(['owner', 'member']),
    members: z.array(ShareMemberInfo),
    status: ShareSyncStatus,
  })
  .meta({ id: 'ShareInfo' });
export type ShareInfo = z.infer<typeof ShareInfo>;

export const SharesResponse = z.object({ shares: z.array(ShareInfo) }).meta({ id: 'SharesResponse' });
export type SharesResponse = z.infer<typeof SharesResponse>;

export const ShareParams = z.object({ id: ShareId });
export const ShareMemberParams = z.object({ id: ShareId, member: UserId });

// ---------------------------------------------------------------- invitations

export const CreateShareInviteRequest = z
  .object({
    /** Validity; default 7 days, at most 30. */
    ttlHours: z.number().int().min(1).max(720).optional(),
  })
  .meta({ id: 'CreateShareInviteRequest' });
export type CreateShareInviteRequest = z.infer<typeof CreateShareInviteRequest>;

/** Prefix of an invitation link; the token follows. */
export const SHARE_LINK_PREFIX = 'weft://share/';

export const ShareInviteResponse = z
  .object({
    shareId: ShareId,
    /** Single use; the server keeps only its SHA-256. Shown once. */
    token: ShareInviteToken,
    /** `weft://share/<token>`: what to send to the collaborator. */
    link: z.string(),
    expiresMs: Ms,
  })
  .meta({ id: 'ShareInviteResponse' });
export type ShareInviteResponse = z.infer<typeof ShareInviteResponse>;

/** The token of an invitation link (or the bare token); undefined if it is neither. */
export function shareInviteTokenFromLink(text: string): string | undefined {
  const t = text.trim();
  const token = t.startsWith(SHARE_LINK_PREFIX) ? t.slice(SHARE_LINK_PREFIX.length) : t;
  return ShareInviteToken.safeParse(token).success ? token : undefined;
}

/** Look at an invitation before accepting it (does not use it up). */
export const ShareInvitePreviewRequest = z
  .object({ token: ShareInviteToken })
  .meta({ id: 'ShareInvitePreviewRequest' });
export const ShareInvitePreview = z
  .object({
    shareId: ShareId,
    name: z.string(),
    owner: UserId,
    invitedBy: UserId,
    expiresMs: Ms,
    members: z.array(z.object({ member: UserId, cloud: CloudKind })),
  })
  .meta({ id: 'ShareInvitePreview' });
export type ShareInvitePreview = z.infer<typeof ShareInvitePreview>;

export const AcceptShareRequest = z
  .object({
    token: ShareInviteToken,
    replica: ReplicaChoice,
  })
  .meta({ id: 'AcceptShareRequest' });
export type AcceptShareRequest = z.infer<typeof AcceptShareRequest>;
