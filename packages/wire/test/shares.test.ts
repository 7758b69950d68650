import { describe, expect, it } from 'vitest';
import {
  AcceptShareRequest,
  ConnectAccountRequest,
  CreateShareRequest,
  ShareInfo,
  SHARE_LINK_PREFIX,
  shareInviteTokenFromLink,
} from '../src/shares.ts';

const token = 'A'.repeat(43);

describe('share schemas', () => {
  it('replicaChoiceNeedsANamedCanonicalFolder', () => {
    expect(
      CreateShareRequest.safeParse({ name: 'Team', replica: { cloud: 'weft', root: 'Team' } }).success,
    ).toBe(true);
    for (const root of ['', '/Team', 'a/../b', 'Team/']) {
      expect(CreateShareRequest.safeParse({ name: 'Team', replica: { cloud: 'weft', root } }).success).toBe(
        false,
      );
    }
    expect(
      CreateShareRequest.safeParse({
        name: 'Team',
        replica: { cloud: 'account', accountId: 'acc_0123456789abcdef', root: 'Team' },
      }).success,
    ).toBe(true);
    expect(
      CreateShareRequest.safeParse({ name: 'Team', replica: { cloud: 'account', accountId: 'x', root: 'a' } })
        .success,
    ).toBe(false);
    expect(CreateShareRequest.safeParse({ name: '  ', replica: { cloud: 'weft', root: 'a' } }).success).toBe(
      false,
    );
  });

  it('connectAccountValidatesProviderAndTokens', () => {
    const ok = { provider: 'dropbox', label: 'ann@example.com', tokens: { accessToken: 't' } };
    expect(ConnectAccountRequest.safeParse(ok).success).toBe(true);
    expect(ConnectAccountRequest.safeParse({ ...ok, provider: 'weft' }).success).toBe(false);
    expect(ConnectAccountRequest.safeParse({ ...ok, tokens: { accessToken: '' } }).success).toBe(false);
  });

  it('inviteTokenFromLinkOrBareToken', () => {
    expect(shareInviteTokenFromLink(`${SHARE_LINK_PREFIX}${token}`)).toBe(token);
    expect(shareInviteTokenFromLink(` ${token} `)).toBe(token);
    expect(shareInviteTokenFromLink('weft://share/short')).toBeUndefined();
    expect(AcceptShareRequest.safeParse({ token: 'x', replica: { cloud: 'weft', root: 'a' } }).success).toBe(
      false,
    );
  });

  it('shareInfoCarriesStatusAndMembers', () => {
    const info = {
      id: '0b8f8e2a-6a55-4c4f-9d53-2a7d0f1c9b11',
      name: 'Team',
      owner: 'ann',
      createdMs: 1,
      role: 'owner',
      members: [{ member: 'ann', role: 'owner', cloud: 'dropbox', joinedMs: 1 }],
      status: { state: 'idle', pending: 0, applied: 3, conflicts: 0 },
    };
    expect(ShareInfo.safeParse(info).success).toBe(true);
    expect(ShareInfo.safeParse({ ...info, status: { ...info.status, state: 'unknown' } }).success).toBe(
      false,
    );
  });
});
