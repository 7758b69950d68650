/** Sharing: share a folder, copy an invite, accept one on your own cloud, members, leave. */
import type { Sharing, WeftClient } from '../../common/api.ts';
import { Scope, h } from '../dom.mts';

export function sharingScreen(
  root: HTMLElement,
  api: WeftClient,
  _scope: Scope,
  report: (m: string) => void,
): void {
  const body = h('div', { id: 'sharing-body' }, h('p', {}, 'Loading…'));
  root.replaceChildren(h('h2', {}, 'Sharing'), body);
  const fail = (e: unknown): void => report(e instanceof Error ? e.message : String(e));
  const draw = (s: Sharing): void => {
    const off = !s.available;
    const invite = h('output', { id: 'invite-out', for: 'share-folder' });
    body.replaceChildren(
      ...(off
        ? [
            h(
              'p',
              { class: 'notice', id: 'sharing-unavailable', role: 'note' },
              `Not available yet. ${s.reason ?? ''}`,
            ),
          ]
        : []),
      h(
        'form',
        {
          'aria-labelledby': 'h-share',
          onsubmit: (e: Event) => {
            e.preventDefault();
            const folder = (document.getElementById('share-folder') as HTMLInputElement).value;
            api.shareFolder({ folder }).then(async (r) => {
              invite.textContent = r.invite;
              await navigator.clipboard?.writeText(r.invite).catch(() => undefined);
            }, fail);
          },
        },
        h('h3', { id: 'h-share' }, 'Share a folder'),
        h(
          'fieldset',
          { disabled: off },
          h('label', { for: 'share-folder' }, 'Folder to share (inside your Weft folder)'),
          h('input', { id: 'share-folder', type: 'text', placeholder: 'Projects/Report' }),
          h('button', { type: 'submit' }, 'Share and copy invite'),
          invite,
        ),
      ),
      h(
        'form',
        {
          'aria-labelledby': 'h-accept',
          onsubmit: (e: Event) => {
            e.preventDefault();
            const val = (id: string): string =>
              (document.getElementById(id) as HTMLInputElement | HTMLSelectElement).value;
            const cloud = val('accept-cloud') as 'weft' | 'dropbox' | 'gdrive' | 'onedrive';
            api
              .acceptInvite({ invite: val('accept-invite'), cloud, folder: val('accept-folder') })
              .then(draw, fail);
          },
        },
        h('h3', { id: 'h-accept' }, 'Accept an invite'),
        h(
          'fieldset',
          { disabled: off },
          h('label', { for: 'accept-invite' }, 'Invite'),
          h('input', { id: 'accept-invite', type: 'text' }),
          h('label', { for: 'accept-cloud' }, 'Keep the files on'),
          h(
            'select',
            { id: 'accept-cloud' },
            h('option', { value: 'weft' }, 'Weft storage'),
            h('option', { value: 'dropbox' }, 'Dropbox'),
            h('option', { value: 'gdrive' }, 'Google Drive'),
            h('option', { value: 'onedrive' }, 'OneDrive'),
          ),
          h('label', { for: 'accept-folder' }, 'In the folder'),
          h('input', { id: 'accept-folder', type: 'text', placeholder: 'Shared/Report' }),
          h('button', { type: 'submit' }, 'Accept invite'),
        ),
      ),
      h(
        'section',
        { 'aria-labelledby': 'h-shares' },
        h('h3', { id: 'h-shares' }, 'Shared folders'),
        s.shares.length === 0
          ? h('p', {}, 'None.')
          : h(
              'ul',
              {},
              s.shares.map((sh) =>
                h(
                  'li',
                  {},
                  h('strong', { class: 'path' }, sh.folder),
                  h(
                    'ul',
                    {},
                    sh.members.map((m) => h('li', {}, `${m.name} — on ${m.cloud}`)),
                  ),
                  h(
                    'button',
                    { type: 'button', onclick: () => api.leaveShare({ id: sh.id }).then(draw, fail) },
                    `Leave ${sh.folder}`,
                  ),
                ),
              ),
            ),
      ),
    );
  };
  api.getSharing({}).then(draw, fail);
}
