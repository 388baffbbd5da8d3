// One entity: its counts and chart, and tabs for what can be done with it.
import { api } from './api.js';
import { el, clear, fill, num, bytes, chart, live, status, pagerControls, when } from './ui.js';
import { history, record, rate, flows, perSec } from './history.js';
import { messagesTab, receiveTab } from './messages.js';
import { sendTab, settingsTab, rulesTab } from './forms.js';

export async function entityView(main, path, tab) {
  let info;
  try {
    info = await api('GET', 'entity', { params: { path } });
  } catch (err) {
    fill(main, el('div', { class: 'panel' }, el('h1', {}, path), el('p', { class: 'error', role: 'alert' }, err.message),
      el('a', { href: '#/' }, 'Back to the queues')));
    return;
  }
  const kind = info.kind; // queue, topic, subscription
  const tabs = kind === 'topic'
    ? [['subscriptions', 'Subscriptions'], ['send', 'Send'], ['settings', 'Settings']]
    : [['messages', 'Messages'], ['send', 'Send'], ['receive', 'Receive'], ['sessions', 'Sessions'], ['rules', 'Rules'], ['settings', 'Settings']]
      .filter(([id]) => (id !== 'sessions' || info.requiresSession) && (id !== 'rules' || kind === 'subscription') && (id !== 'send' || kind === 'queue'));
  if (!tabs.some(([id]) => id === tab)) tab = tabs[0][0];

  const cards = el('div', { class: 'cards' });
  const graph = el('div', { class: 'graph' });
  const pane = el('section', { class: 'pane', id: 'pane', 'aria-live': 'polite' });
  const base = '#/entity/' + encodeURIComponent(path) + '/';
  const crumbs = [el('a', { href: kind === 'queue' ? '#/' : '#/topics' }, kind === 'queue' ? 'Queues' : 'Topics')];
  if (kind === 'subscription') crumbs.push(' / ', el('a', { href: '#/entity/' + encodeURIComponent(info.topic) }, info.topic));
  fill(main, 
    el('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, crumbs),
    el('div', { class: 'bar' }, el('h1', {}, kind === 'subscription' ? info.name : info.path), el('span', { class: 'kind' }, kind), status(info.status),
      info.requiresSession ? el('span', { class: 'kind' }, 'sessions') : null,
      info.forwardTo ? el('span', { class: 'muted' }, '→ ' + info.forwardTo) : null),
    cards, graph,
    el('div', { class: 'tabs', role: 'tablist' }, tabs.map(([id, label]) =>
      el('a', { href: base + id, role: 'tab', 'aria-selected': String(id === tab), class: id === tab ? 'on' : '' }, label))),
    pane);

  const ctx = { path, info, refresh: () => {} };
  function drawCounts(it) {
    const c = it.counts;
    const card = (label, value, cls = '') => el('div', { class: 'card ' + cls }, el('div', { class: 'v' }, value), el('div', { class: 'l' }, label));
    const h = history(path);
    const f = kind === 'topic' ? null : flows(h);
    fill(cards, ...(kind === 'topic'
      ? [card('Subscriptions', num(c.subscriptions)), card('Size', bytes(c.sizeBytes))]
      : [card('Active', num(c.active)), card('Dead-lettered', num(c.deadLetter), c.deadLetter ? 'warn' : ''),
        card('Scheduled', num(c.scheduled)), card('Deferred', num(c.deferred)), card('Size', bytes(c.sizeBytes)),
        card('Net change', rate(h) || '—')]),
    f ? [card('In', perSec(f.inRate[f.inRate.length - 1])), card('Out', perSec(f.outRate[f.outRate.length - 1]))] : []);
    const held = kind === 'topic'
      ? [chart([{ name: 'size', values: h.map((s) => s.size) }]), el('div', { class: 'legend muted' }, 'Size, last minutes')]
      : [chart([{ name: 'active', values: h.map((s) => s.active) }, { name: 'dead-lettered', values: h.map((s) => s.deadLetter) }]),
        el('div', { class: 'legend muted' }, el('span', { class: 'key s0' }, 'active'), ' ', el('span', { class: 'key s1' }, 'dead-lettered'), ' — messages held')];
    const rates = f ? [chart([{ name: 'in', values: f.inRate }, { name: 'out', values: f.outRate }]),
      el('div', { class: 'legend muted' }, el('span', { class: 'key s0' }, 'in'), ' ', el('span', { class: 'key s1' }, 'out'), ' — messages per second')] : [];
    fill(graph, el('div', {}, held), f ? el('div', {}, rates) : null);
    graph.append(el('div', { class: 'legend muted wide' }, 'Last minutes, sampled every 3 s while this page is open.'));
  }
  record([info]);
  drawCounts(info);
  live(async () => {
    const it = await api('GET', 'entity', { params: { path } });
    record([it]);
    drawCounts(it);
    ctx.info = it;
    ctx.refresh(it);
  });

  switch (tab) {
    case 'messages': messagesTab(pane, ctx); break;
    case 'receive': receiveTab(pane, ctx); break;
    case 'send': sendTab(pane, ctx); break;
    case 'sessions': sessionsTab(pane, ctx); break;
    case 'rules': rulesTab(pane, ctx); break;
    case 'subscriptions': subscriptionsTab(pane, ctx); break;
    case 'settings': settingsTab(pane, ctx); break;
  }
}

// subscriptionsTab lists a topic's subscriptions with their counts.
function subscriptionsTab(pane, ctx) {
  const state = { skip: 0, top: 50 };
  const body = el('tbody');
  const pager = el('div', { class: 'pager' });
  fill(pane, 
    el('div', { class: 'bar' }, el('h2', {}, 'Subscriptions'),
      el('a', { class: 'button', href: '#/new/subscription/' + encodeURIComponent(ctx.path) }, 'New subscription')),
    el('div', { class: 'scroll' }, el('table', { class: 'list' },
      el('thead', {}, el('tr', {}, ['Name', 'Status', 'Active', 'Dead-lettered', 'Scheduled', 'Deferred', 'Size'].map((h) => el('th', { scope: 'col' }, h)))), body)),
    pager);
  async function load() {
    const res = await api('GET', 'entities', { params: { kind: 'subscriptions', topic: ctx.path, skip: state.skip, top: state.top } });
    record(res.items);
    clear(body);
    if (!res.items.length) body.append(el('tr', {}, el('td', { colspan: 7, class: 'muted' }, 'No subscriptions yet: messages sent to the topic go nowhere.')));
    for (const it of res.items) {
      const c = it.counts;
      body.append(el('tr', {}, el('th', { scope: 'row' }, el('a', { href: '#/entity/' + encodeURIComponent(it.path) }, it.name)),
        el('td', {}, status(it.status)), el('td', { class: 'n' }, num(c.active)),
        el('td', { class: 'n' + (c.deadLetter ? ' warn' : '') }, num(c.deadLetter)), el('td', { class: 'n' }, num(c.scheduled)),
        el('td', { class: 'n' }, num(c.deferred)), el('td', { class: 'n' }, bytes(c.sizeBytes))));
    }
    fill(pager, ...pagerControls(state, res.total, load));
  }
  load();
  ctx.refresh = () => load();
}

// sessionsTab lists the sessions of a session-enabled entity.
function sessionsTab(pane, ctx) {
  const afters = [''];
  const body = el('tbody');
  const pager = el('div', { class: 'pager' });
  fill(pane, el('h2', {}, 'Sessions'),
    el('p', { class: 'muted' }, 'Sessions with messages, state or a receiver holding them. The broker knows a holder only by its lock.'),
    el('div', { class: 'scroll' }, el('table', { class: 'list' },
      el('thead', {}, el('tr', {}, ['Session id', 'Messages', 'Held by a receiver', 'State', 'State set'].map((h) => el('th', { scope: 'col' }, h)))), body)),
    pager);
  async function load() {
    const res = await api('GET', 'sessions', { params: { path: ctx.path, after: afters[afters.length - 1], top: 50 } });
    clear(body);
    if (!res.items.length) body.append(el('tr', {}, el('td', { colspan: 5, class: 'muted' }, 'No sessions.')));
    for (const s of res.items) {
      const state = s.stateSize === 0 ? '—' : (s.stateText !== undefined && s.stateText !== '' ? s.stateText : '(binary, base64) ' + s.stateBase64)
        + (s.stateSize > 1024 ? ` … (${bytes(s.stateSize)})` : '');
      body.append(el('tr', {}, el('th', { scope: 'row' }, s.id), el('td', { class: 'n' }, num(s.messages)),
        el('td', {}, s.locked ? 'yes, until ' + when(s.lockedUntil) : 'no'),
        el('td', { class: 'state' }, state), el('td', {}, when(s.stateSetAt))));
    }
    const last = res.items.length ? res.items[res.items.length - 1].id : null;
    fill(pager, 
      el('button', { class: 'secondary small', disabled: afters.length === 1, onclick: () => { afters.pop(); load(); } }, '← Previous'),
      el('span', { class: 'muted' }, `${num(res.total)} sessions`),
      el('button', { class: 'secondary small', disabled: !last || res.items.length < 50, onclick: () => { afters.push(last); load(); } }, 'Next →'));
  }
  load();
  ctx.refresh = () => load();
}
