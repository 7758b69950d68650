/**
 * Sharing: share a folder of one of your clouds, copy the invitation, accept one choosing
 * your own cloud and folder, see the members and the cloud each is on, leave.
 */
import type { Account, Invite, Share, Sharing, WeftClient } from '../../common/api.ts';
import { CLOUD_LABEL } from '../../common/format.ts';
import { Scope, h, renderInto, timeText } from '../dom.mts';

type Cloud = Account['kind'];

export function sharingScreen(
  root: HTMLElement,
  api: WeftClient,
  scope: Scope,
  report: (m: string) => void,
): void {
  const body = h('div', { id: 'sharing-body' }, h('p', {}, 'Loading…'));
  root.replaceChildren(h('h2', {}, 'Sharing'), body);
  const fail = (e: unknown): void => report(e instanceof Error ? e.message : String(e));
  const announce = h('p', { id: 'sharing-status', role: 'status' });
  const inviteBox = h('div', { id: 'invite-box' });
  const val = (id: string): string =>
    (document.getElementById(id) as HTMLInputElement | HTMLSelectElement).value;

  const showInvite = (invite: Invite, shareName: string): void => {
    const copy = (): void => {
      const input = document.getElementById('invite-link') as HTMLInputElement;
      input.select();
      const done = (): void => void (announce.textContent = 'Invitation copied.');
      if (navigator.clipboard) navigator.clipboard.writeText(invite.invite).then(done, () => undefined);
      else done();
    };
    inviteBox.replaceChildren(
      h(
        'section',
        { class: 'notice', 'aria-labelledby': 'h-invite' },
        h('h3', { id: 'h-invite' }, `Invitation to ${shareName}`),
        h('label', { for: 'invite-link' }, 'Send this link to your collaborator'),
        h('input', {
          id: 'invite-link',
          type: 'text',
          readonly: true,
          value: invite.invite,
          size: 60,
          'aria-describedby': 'invite-hint',
        }),
        h(
          'p',
          { class: 'hint', id: 'invite-hint' },
          `It works once, until ${timeText(invite.expiresMs)}. They choose their own cloud and folder.`,
        ),
        h('button', { type: 'button', id: 'invite-copy', onclick: copy }, 'Copy invitation'),
      ),
    );
    (document.getElementById('invite-link') as HTMLInputElement | null)?.focus();
  };

  const cloudSelect = (id: string, clouds: Cloud[]): HTMLSelectElement =>
    h(
      'select',
      { id },
      clouds.map((c) => h('option', { value: c }, CLOUD_LABEL[c])),
    );

  const shareItem = (sh: Share): HTMLElement =>
    h(
      'li',
      { class: 'share', 'data-share': sh.id },
      h('h4', { id: `share-${sh.id}` }, sh.name),
      h(
        'p',
        {},
        sh.cloud ? `You keep it in ${CLOUD_LABEL[sh.cloud]}` : 'Yours',
        sh.folder ? [': ', h('span', { class: 'path' }, sh.folder)] : '',
        ` · ${sh.role === 'owner' ? 'you own it' : 'member'} · `,
        h('span', { class: 'share-state' }, sh.state),
      ),
      sh.error ? h('p', { class: 'problem', role: 'alert' }, sh.error) : null,
      h(
        'table',
        { class: 'members' },
        h('caption', { class: 'sr-only' }, `Members of ${sh.name}`),
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            h('th', { scope: 'col' }, 'Member'),
            h('th', { scope: 'col' }, 'Cloud'),
            h('th', { scope: 'col' }, 'Role'),
          ),
        ),
        h(
          'tbody',
          {},
          sh.members.map((m) =>
            h(
              'tr',
              {},
              h('td', {}, m.you ? `${m.name} (you)` : m.name),
              h('td', {}, CLOUD_LABEL[m.cloud]),
              h('td', {}, m.role === 'owner' ? 'Owner' : 'Member'),
            ),
          ),
        ),
      ),
      // A member whose cloud refuses the mirror's writes (full, access revoked, failing):
      // shown to everyone in the share, the owner included; their changes wait, none lost.
      sh.members
        .filter((m) => m.availability?.state === 'unavailable')
        .map((m) =>
          h(
            'p',
            { class: 'problem replica-unavailable', role: 'status' },
            `${m.you ? 'Your' : `${m.name}’s`} ${CLOUD_LABEL[m.cloud]}: ${m.availability?.summary ?? ''}`,
            m.availability?.detail ? ` (${m.availability.detail})` : '',
          ),
        ),
      h(
        'div',
        { class: 'row' },
        h(
          'button',
          {
            type: 'button',
            onclick: () => api.createInvite({ id: sh.id }).then((i) => showInvite(i, sh.name), fail),
          },
          `Invite someone to ${sh.name}`,
        ),
        h(
          'button',
          {
            type: 'button',
            onclick: () =>
              api.leaveShare({ id: sh.id }).then((s) => {
                announce.textContent = `You left ${sh.name}. Your folder stays as it is.`;
                update(s);
              }, fail),
          },
          `Leave ${sh.name}`,
        ),
      ),
    );

  const notice = h('div', { id: 'sharing-notice' });
  const list = h('div', { id: 'shares' });
  const fieldsets: HTMLFieldSetElement[] = [];
  /** Shares and availability; the forms (and what is typed in them) stay. */
  const update = (s: Sharing): void => {
    for (const f of fieldsets) f.disabled = !s.available;
    renderInto(notice, JSON.stringify([s.available, s.reason]), () =>
      s.available
        ? null
        : h(
            'p',
            { class: 'notice', id: 'sharing-unavailable', role: 'note' },
            `Sharing is not available. ${s.reason ?? ''}`,
          ),
    );
    renderInto(list, JSON.stringify(s.shares), () =>
      s.shares.length === 0
        ? h('p', { id: 'shares-none' }, 'None yet.')
        : h('ul', { class: 'shares', id: 'shares-list' }, s.shares.map(shareItem)),
    );
  };
  const preview = h('p', { id: 'invite-preview', class: 'hint', 'aria-live': 'polite' });
  let previewTimer: ReturnType<typeof setTimeout> | undefined;
  scope.add(() => clearTimeout(previewTimer));
  /** What the pasted invitation leads to, before accepting it (does not use it up). */
  const previewInvite = (): void => {
    const invite = val('accept-invite').trim();
    if (invite === '') return void preview.replaceChildren();
    api.previewInvite({ invite }).then(
      (p) => {
        if (val('accept-invite').trim() !== invite) return;
        const members = p.members.map((m) => `${m.name} on ${CLOUD_LABEL[m.cloud]}`).join(', ');
        preview.textContent = `“${p.name}”, shared by ${p.owner}${p.invitedBy !== p.owner ? `, invited by ${p.invitedBy}` : ''}. Members: ${members}. Valid until ${timeText(p.expiresMs)}.`;
      },
      (e: unknown) => {
        if (val('accept-invite').trim() !== invite) return;
        preview.textContent = `Cannot use this invitation: ${e instanceof Error ? e.message : String(e)}`;
      },
    );
  };
  const build = (s: Sharing, clouds: Cloud[]): void => {
    const off = !s.available;
    const shareForm = h(
      'form',
      { 'aria-labelledby': 'h-share', id: 'share-form' },
      h('h3', { id: 'h-share' }, 'Share a folder'),
      h(
        'fieldset',
        { disabled: off },
        h('legend', { class: 'sr-only' }, 'Share a folder'),
        h('label', { for: 'share-name' }, 'Name of the shared folder'),
        h('input', { id: 'share-name', type: 'text', required: true, placeholder: 'Team plans' }),
        h('label', { for: 'share-cloud' }, 'It is in'),
        cloudSelect('share-cloud', clouds),
        h('label', { for: 'share-folder' }, 'Folder'),
        h('input', {
          id: 'share-folder',
          type: 'text',
          required: true,
          placeholder: 'Team/Plans',
          'aria-describedby': 'share-folder-hint',
        }),
        h(
          'p',
          { class: 'hint', id: 'share-folder-hint' },
          'A folder that exists in that cloud. Connect more clouds under Accounts.',
        ),
        h('button', { type: 'submit' }, 'Share and create invitation'),
      ),
    );
    shareForm.addEventListener('submit', (e) => {
      e.preventDefault();
      const name = val('share-name');
      api
        .shareFolder({ name, cloud: val('share-cloud') as Cloud, folder: val('share-folder') })
        .then(async (invite) => {
          showInvite(invite, name);
          update(await api.getSharing({}));
        }, fail);
    });
    const acceptForm = h(
      'form',
      { 'aria-labelledby': 'h-accept', id: 'accept-form' },
      h('h3', { id: 'h-accept' }, 'Accept an invitation'),
      h(
        'fieldset',
        { disabled: off },
        h('legend', { class: 'sr-only' }, 'Accept an invitation'),
        h('label', { for: 'accept-invite' }, 'Invitation link'),
        h('input', {
          id: 'accept-invite',
          type: 'text',
          required: true,
          placeholder: 'weft://share/…',
          'aria-describedby': 'invite-preview',
          oninput: () => {
            clearTimeout(previewTimer);
            previewTimer = setTimeout(previewInvite, 300);
          },
        }),
        preview,
        h('label', { for: 'accept-cloud' }, 'Keep the files in'),
        cloudSelect('accept-cloud', clouds),
        h('label', { for: 'accept-folder' }, 'In the folder'),
        h('input', {
          id: 'accept-folder',
          type: 'text',
          required: true,
          placeholder: 'Shared/Team plans',
          'aria-describedby': 'accept-folder-hint',
        }),
        h(
          'p',
          { class: 'hint', id: 'accept-folder-hint' },
          'Created if missing; files already in it are merged, never lost.',
        ),
        h('button', { type: 'submit' }, 'Accept invitation'),
      ),
    );
    acceptForm.addEventListener('submit', (e) => {
      e.preventDefault();
      api
        .acceptInvite({
          invite: val('accept-invite'),
          cloud: val('accept-cloud') as Cloud,
          folder: val('accept-folder'),
        })
        .then((r) => {
          announce.textContent = 'Invitation accepted. The files are being copied to your folder.';
          update(r);
        }, fail);
    });
    fieldsets.push(...shareForm.querySelectorAll('fieldset'), ...acceptForm.querySelectorAll('fieldset'));
    body.replaceChildren(
      notice,
      announce,
      shareForm,
      inviteBox,
      acceptForm,
      h('section', { 'aria-labelledby': 'h-shares' }, h('h3', { id: 'h-shares' }, 'Shared folders'), list),
    );
    update(s);
    // Members joining or leaving and the mirror's state show up without a reload.
    const poll = (): void => {
      if (!live) return;
      timer = setTimeout(() => {
        api
          .getSharing({})
          .then(update, () => undefined)
          .finally(poll);
      }, 3000);
    };
    poll();
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  let live = true;
  scope.add(() => {
    live = false;
    clearTimeout(timer);
  });
  Promise.all([api.getSharing({}), api.listAccounts({})]).then(([s, a]) => {
    const clouds: Cloud[] = ['weft'];
    for (const acc of a.accounts) if (acc.kind !== 'weft' && acc.state === 'connected') clouds.push(acc.kind);
    build(s, clouds);
  }, fail);
}
