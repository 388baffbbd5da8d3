// The console's entry point: login, the hash router, the namespace view.
import { api, login, logout, rootToken, session, switchNamespace } from './api.js';
import { el, clear, fill, toast, busy, num, bytes, sparkline, field, live, stopLive, status, pagerControls } from './ui.js';
import { history, record, rate, flows, perSec } from './history.js';
import { entityView } from './entity.js';
import { createView } from './forms.js';

const main = document.getElementById('main');
function header() {
  const s = session();
  const who = clear(document.getElementById('who'));
  const nav = clear(document.getElementById('nav'));
  if (!s) return;
  nav.append(el('a', { href: '#/' }, 'Queues'), el('a', { href: '#/topics' }, 'Topics'));
  const picker = el('span', { class: 'ns' });
  who.append(picker, el('span', { title: 'rights: ' + s.rights }, s.keyName),
    el('button', { class: 'secondary small', onclick: () => { logout(); } }, 'Log out'));
  namespacePicker(picker);
}

// namespacePicker shows the session's namespace and, to the root key,
// a choice of every namespace: picking one switches the session to it.
async function namespacePicker(into) {
  let list;
  try { list = await api('GET', 'namespaces', { auth: rootToken() }); } catch { return; }
  const s = session();
  if (s && s.namespace) list.current = s.namespace;
  if (!list.switch || list.names.length < 2) {
    fill(into, el('span', { class: 'muted', title: 'namespace' }, list.current));
    return;
  }
  const select = el('select', { 'aria-label': 'Namespace', id: 'namespace' },
    list.names.map((n) => el('option', { value: n, selected: n === list.current }, n)));
  select.addEventListener('change', async () => {
    try {
      await switchNamespace(select.value);
      toast('Namespace ' + select.value);
      location.hash = '#/';
      route();
    } catch (x) { toast(x.message); select.value = list.current; }
  });
  fill(into, select);
}

function loginView() {
  stopLive();
  let mode = 'key';
  const keyName = el('input', { name: 'keyName', autocomplete: 'username', value: 'RootManageSharedAccessKey', required: true });
  const key = el('input', { name: 'key', type: 'password', autocomplete: 'current-password', required: true });
  const token = el('textarea', { name: 'token', rows: 4, placeholder: 'SharedAccessSignature sr=…&sig=…&se=…&skn=…' });
  const keyFields = el('div', {}, field('Key name', keyName), field('Key', key, 'The shared access key of that rule.'));
  const tokenFields = el('div', { hidden: true }, field('SAS token', token));
  const err = el('p', { class: 'error', role: 'alert' });
  const tabs = el('div', { class: 'seg', role: 'group', 'aria-label': 'Log in with' },
    el('button', { type: 'button', 'aria-pressed': 'true', onclick: (e) => pick(e, 'key') }, 'Key'),
    el('button', { type: 'button', 'aria-pressed': 'false', onclick: (e) => pick(e, 'token') }, 'SAS token'));
  function pick(e, m) {
    mode = m;
    for (const b of tabs.children) b.setAttribute('aria-pressed', String(b === e.currentTarget));
    keyFields.hidden = m !== 'key';
    tokenFields.hidden = m !== 'token';
    key.required = m === 'key';
    keyName.required = m === 'key';
  }
  const submit = el('button', { type: 'submit', id: 'login' }, 'Log in');
  const form = el('form', {
    class: 'panel login', onsubmit: async (e) => {
      e.preventDefault();
      err.textContent = '';
      await busy(submit, async () => {
        try {
          const creds = mode === 'key' ? { keyName: keyName.value.trim(), key: key.value } : { token: token.value.trim() };
          await login(creds);
          route();
        } catch (x) { err.textContent = x.message; }
      });
    },
  }, el('h1', {}, 'Log in'),
  el('p', { class: 'muted' }, 'Use a shared access key of this namespace (the emulator default is RootManageSharedAccessKey / SAS_KEY_VALUE), or paste a SAS token.'),
  tabs, keyFields, tokenFields, err, el('div', { class: 'buttons' }, submit));
  fill(main, form);
  keyName.focus();
}

// overview lists queues or topics, a page at a time, refreshed live.
function overview(kind) {
  const state = { q: '', skip: 0, top: 50 };
  const search = el('input', { type: 'search', placeholder: 'Filter by name', 'aria-label': 'Filter by name' });
  let debounce;
  search.addEventListener('input', () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => { state.q = search.value.trim(); state.skip = 0; load(); }, 250);
  });
  const body = el('tbody');
  const pager = el('div', { class: 'pager' });
  const title = kind === 'queues' ? 'Queues' : 'Topics';
  const heads = kind === 'queues'
    ? ['Name', 'Status', 'Active', 'Dead-lettered', 'Scheduled', 'Deferred', 'Size', 'Live']
    : ['Name', 'Status', 'Subscriptions', 'Size', 'Live'];
  const table = el('table', { class: 'list' }, el('caption', { class: 'sr-only' }, title),
    el('thead', {}, el('tr', {}, heads.map((h) => el('th', { scope: 'col' }, h)))), body);
  fill(main, 
    el('div', { class: 'bar' }, el('h1', {}, title), search,
      el('a', { class: 'button', href: kind === 'queues' ? '#/new/queue' : '#/new/topic' }, kind === 'queues' ? 'New queue' : 'New topic')),
    el('div', { class: 'scroll' }, table), pager);

  async function load() {
    const res = await api('GET', 'entities', { params: { kind, q: state.q, skip: state.skip, top: state.top } });
    record(res.items);
    clear(body);
    if (res.items.length === 0) {
      body.append(el('tr', {}, el('td', { colspan: heads.length, class: 'muted' }, state.q ? 'Nothing matches.' : 'None yet.')));
    }
    for (const it of res.items) {
      const c = it.counts;
      const link = el('a', { href: '#/entity/' + encodeURIComponent(it.path) }, it.path);
      const hist = history(it.path);
      if (kind === 'queues') {
        body.append(el('tr', {}, el('th', { scope: 'row' }, link), el('td', {}, status(it.status)),
          el('td', { class: 'n' }, num(c.active)), el('td', { class: 'n' + (c.deadLetter ? ' warn' : '') }, num(c.deadLetter)),
          el('td', { class: 'n' }, num(c.scheduled)), el('td', { class: 'n' }, num(c.deferred)),
          el('td', { class: 'n' }, bytes(c.sizeBytes)),
          liveCell(it.path, hist)));
      } else {
        body.append(el('tr', {}, el('th', { scope: 'row' }, link), el('td', {}, status(it.status)),
          el('td', { class: 'n' }, num(c.subscriptions)), el('td', { class: 'n' }, bytes(c.sizeBytes)),
          flows(hist) ? liveCell(it.path, hist) : el('td', { class: 'spark-cell' }, sparkline(hist.map((h) => h.size), { label: 'size of ' + it.path }))));
      }
    }
    fill(pager, ...pagerControls(state, res.total, load));
  }
  live(load);
}

// liveCell charts an entity's incoming rate when the broker keeps
// statistics, else the messages it holds.
function liveCell(path, hist) {
  const f = flows(hist);
  if (f) {
    const last = (a) => a[a.length - 1];
    return el('td', { class: 'spark-cell' }, sparkline(f.inRate, { label: 'incoming messages per second, ' + path }),
      el('small', {}, 'in ' + perSec(last(f.inRate)) + ' · out ' + perSec(last(f.outRate))));
  }
  return el('td', { class: 'spark-cell' }, sparkline(hist.map((h) => h.total), { label: 'message count of ' + path }), el('small', {}, rate(hist)));
}

// route shows the view the location's hash names.
export function route() {
  header();
  if (!session()) { loginView(); return; }
  stopLive();
  const h = decodeURI(location.hash.slice(1)) || '/';
  const parts = location.hash.slice(1).split('/').filter(Boolean);
  if (h === '/' || parts[0] === 'queues') overview('queues');
  else if (parts[0] === 'topics') overview('topics');
  else if (parts[0] === 'entity') entityView(main, decodeURIComponent(parts[1] || ''), parts[2] || '');
  else if (parts[0] === 'new') createView(main, parts[1], decodeURIComponent(parts[2] || ''));
  else overview('queues');
  main.focus({ preventScroll: true });
}

window.addEventListener('hashchange', route);
window.addEventListener('omnibus-logout', () => { toast('Logged out'); route(); });
route();
