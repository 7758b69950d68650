/**
 * Accounts: Weft storage (this device's server; enrolment with a server address and an
 * invite code or admin token on the first run), this computer and the user's other devices
 * (each can be removed, after a confirmation; removing this computer signs it out), and
 * clouds connected through OAuth.
 */
import type { Account, CloudProvider, Device, Devices, WeftClient } from '../../common/api.ts';
import { Scope, h, renderInto, timeText } from '../dom.mts';

const CLOUDS: { id: CloudProvider; name: string }[] = [
  { id: 'dropbox', name: 'Dropbox' },
  { id: 'gdrive', name: 'Google Drive' },
  { id: 'onedrive', name: 'OneDrive' },
];

const STATE_TEXT: Record<Account['state'], string> = {
  connected: 'Connected',
  connecting: 'Waiting for you to sign in in the browser…',
  error: 'Could not connect',
};

export function accountsScreen(
  root: HTMLElement,
  api: WeftClient,
  scope: Scope,
  report: (m: string) => void,
): void {
  const weft = h('div', { id: 'weft-account' });
  const devices = h('div', { id: 'weft-devices' });
  const deviceNote = h('p', { id: 'device-note', role: 'status' });
  const clouds = h('ul', { class: 'accounts', id: 'cloud-accounts' });
  const link = h('p', { id: 'signin-link', 'aria-live': 'polite' });
  root.replaceChildren(
    h('h2', {}, 'Accounts'),
    h(
      'section',
      { 'aria-labelledby': 'h-weft' },
      h('h3', { id: 'h-weft' }, 'Weft storage'),
      weft,
      devices,
      deviceNote,
    ),
    h(
      'section',
      { 'aria-labelledby': 'h-clouds' },
      h('h3', { id: 'h-clouds' }, 'Clouds'),
      h(
        'p',
        {},
        'Connect a cloud to share folders with people who keep their files there. You sign in on the cloud’s own page; Weft never sees your password.',
      ),
      clouds,
      link,
    ),
  );
  let timer: ReturnType<typeof setTimeout> | undefined;
  scope.add(() => timer && clearTimeout(timer));

  const draw = (accounts: Account[]): void => {
    const home = accounts.find((a) => a.kind === 'weft');
    renderInto(weft, JSON.stringify(home ?? null), () =>
      home && home.state === 'error'
        ? [h('p', { class: 'error', id: 'weft-removed', role: 'alert' }, home.detail ?? ''), weftForm()]
        : home
          ? h(
              'dl',
              { class: 'facts' },
              h('dt', {}, 'Server'),
              h('dd', { class: 'path' }, home.label),
              h('dt', {}, 'This device'),
              h('dd', {}, home.detail ?? ''),
            )
          : weftForm(),
    );
    renderInto(clouds, JSON.stringify(accounts.filter((a) => a.kind !== 'weft')), () =>
      CLOUDS.map((c) => {
        const a = accounts.find((x) => x.kind === c.id);
        return h(
          'li',
          { class: 'account', 'data-cloud': c.id },
          h('span', { class: 'name', id: `name-${c.id}` }, c.name),
          h(
            'span',
            { class: `account-state state-${a?.state ?? 'none'}`, id: `state-${c.id}` },
            a
              ? STATE_TEXT[a.state] +
                  (a.connectedAtMs ? ` since ${timeText(a.connectedAtMs)}` : '') +
                  (a.detail ? ` — ${a.detail}` : '')
              : 'Not connected',
          ),
          a?.state === 'connected'
            ? h(
                'button',
                {
                  type: 'button',
                  'aria-describedby': `name-${c.id}`,
                  onclick: () => api.disconnect({ kind: c.id }).then((r) => draw(r.accounts), fail),
                },
                `Disconnect ${c.name}`,
              )
            : h(
                'button',
                {
                  type: 'button',
                  'aria-describedby': `state-${c.id}`,
                  onclick: () => connectCloud(c.id, c.name),
                },
                `Connect ${c.name}`,
              ),
        );
      }),
    );
    if (accounts.some((a) => a.state === 'connecting')) {
      timer = setTimeout(refresh, 700);
    } else {
      link.replaceChildren();
    }
  };
  const fail = (e: unknown): void => report(e instanceof Error ? e.message : String(e));

  /** The device whose removal waits for a confirmation, if any. */
  let confirming: string | undefined;
  let shownDevices: Devices | undefined;
  const drawDevices = (list: Devices): void => {
    shownDevices = list;
    renderInto(devices, JSON.stringify([list, confirming]), () =>
      list.available
        ? [
            h('h4', { id: 'h-devices' }, 'Your devices'),
            h(
              'ul',
              { class: 'accounts', id: 'device-list', 'aria-labelledby': 'h-devices' },
              ...list.devices.map(deviceItem),
            ),
          ]
        : null,
    );
  };
  const deviceItem = (d: Device): HTMLElement => {
    const nameId = `device-name-${d.id}`;
    const seen = d.current ? 'now' : d.lastSeenMs !== undefined ? timeText(d.lastSeenMs) : 'not yet';
    return h(
      'li',
      { class: 'account device', 'data-device': d.id },
      h('span', { class: 'name', id: nameId }, d.current ? `${d.name} (this computer)` : d.name),
      h('span', { class: 'account-state' }, `Added ${timeText(d.createdMs)} · last seen ${seen}`),
      confirming === d.id
        ? h(
            'div',
            { class: 'confirm', role: 'group', 'aria-labelledby': `confirm-${d.id}` },
            h(
              'p',
              { id: `confirm-${d.id}` },
              d.current
                ? `Remove this computer from your Weft account? It stops syncing and is signed out; its files stay on this computer.`
                : `Remove ${d.name} from your Weft account? It stops syncing at once and needs a new invite to sync again; its files stay on it.`,
            ),
            h(
              'button',
              { type: 'button', class: 'danger', id: 'confirm-remove', onclick: () => remove(d) },
              d.current ? 'Remove and sign out' : `Remove ${d.name}`,
            ),
            h('button', { type: 'button', id: 'cancel-remove', onclick: () => ask(undefined) }, 'Cancel'),
          )
        : h(
            'button',
            { type: 'button', 'aria-describedby': nameId, onclick: () => ask(d.id) },
            d.current ? 'Remove this computer' : `Remove ${d.name}`,
          ),
    );
  };
  const ask = (id: string | undefined): void => {
    confirming = id;
    deviceNote.textContent = '';
    if (shownDevices) drawDevices(shownDevices);
    if (id) document.getElementById('confirm-remove')?.focus();
  };
  const remove = (d: Device): void => {
    confirming = undefined;
    api.removeDevice({ id: d.id }).then((list) => {
      drawDevices(list);
      deviceNote.textContent = d.current
        ? 'This computer was removed from your Weft account and signed out.'
        : `${d.name} was removed from your Weft account.`;
      if (d.current) refresh();
    }, fail);
  };
  const weftForm = (): HTMLElement => {
    const progress = h('p', { id: 'weft-connect-status', role: 'status' });
    const field = (id: string, label: string, attrs: Record<string, string | boolean>, hint?: string) => [
      h('label', { for: id }, label),
      h('input', { id, name: id, ...attrs, ...(hint ? { 'aria-describedby': `${id}-hint` } : {}) }),
      hint ? h('p', { class: 'hint', id: `${id}-hint` }, hint) : null,
    ];
    const form = h(
      'form',
      { id: 'weft-form', 'aria-labelledby': 'h-weft-form' },
      h('p', { id: 'h-weft-form' }, 'This computer is not connected to Weft storage yet.'),
      h(
        'fieldset',
        {},
        h('legend', {}, 'Connect to a Weft server'),
        ...field(
          'weft-server',
          'Server address',
          { type: 'url', required: true, placeholder: 'https://weft.example.com', autocomplete: 'url' },
          'Ask the person who runs your Weft server.',
        ),
        h('label', { for: 'weft-kind' }, 'I have'),
        h(
          'select',
          { id: 'weft-kind' },
          h('option', { value: 'invite' }, 'an invite code'),
          h('option', { value: 'adminToken' }, 'the server’s admin token'),
        ),
        ...field('weft-code', 'Invite code or admin token', {
          type: 'password',
          required: true,
          autocomplete: 'off',
          spellcheck: false,
        }),
        ...field(
          'weft-user',
          'Your user name (with an admin token)',
          { type: 'text', autocomplete: 'username', spellcheck: false, placeholder: 'me' },
          'Lower-case letters, digits, dot, dash or underscore.',
        ),
        h('button', { type: 'submit', id: 'weft-connect' }, 'Connect to Weft storage'),
        progress,
      ),
    );
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const v = (id: string): string =>
        (document.getElementById(id) as HTMLInputElement | HTMLSelectElement).value.trim();
      const kind = v('weft-kind');
      const code = v('weft-code');
      const user = v('weft-user');
      const button = document.getElementById('weft-connect') as HTMLButtonElement;
      button.disabled = true;
      progress.textContent = 'Connecting…';
      api
        .connectWeft({
          server: v('weft-server'),
          ...(user ? { user } : {}),
          enrolment:
            kind === 'adminToken'
              ? { kind: 'adminToken', adminToken: code }
              : { kind: 'invite', invite: code },
        })
        .then(
          (r) => draw(r.accounts),
          (err: unknown) => {
            button.disabled = false;
            progress.textContent = '';
            fail(err);
          },
        );
    });
    return form;
  };
  const refresh = (): void => {
    timer = undefined;
    api.listAccounts({}).then((r) => draw(r.accounts), fail);
    api.listDevices({}).then(drawDevices, fail);
  };
  const connectCloud = (id: CloudProvider, name: string): void => {
    api.connectCloud({ provider: id }).then(({ authorizeUrl }) => {
      link.replaceChildren(
        `Sign in to ${name} in the page that opened. If none opened, `,
        h(
          'a',
          { href: authorizeUrl, target: '_blank', rel: 'noopener noreferrer', id: 'signin-anchor' },
          `open the ${name} sign-in page`,
        ),
        '.',
      );
      window.open(authorizeUrl, '_blank', 'noopener');
      refresh();
    }, fail);
  };
  refresh();
}
