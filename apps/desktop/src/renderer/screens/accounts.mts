/**
 * Accounts: Weft storage (this device's server; enrolment with a server address and an
 * invite code or admin token on the first run) and clouds connected through OAuth.
 */
import type { Account, CloudProvider, WeftClient } from '../../common/api.ts';
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
  const clouds = h('ul', { class: 'accounts', id: 'cloud-accounts' });
  const link = h('p', { id: 'signin-link', 'aria-live': 'polite' });
  root.replaceChildren(
    h('h2', {}, 'Accounts'),
    h('section', { 'aria-labelledby': 'h-weft' }, h('h3', { id: 'h-weft' }, 'Weft storage'), weft),
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
      home
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
