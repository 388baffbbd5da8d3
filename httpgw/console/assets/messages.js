// Peeking, receiving and settling messages, resubmitting dead letters,
// purging, and showing one message.
import { api, receive, settleREST } from './api.js';
import { el, clear, fill, toast, busy, confirmAction, num, bytes, when, field } from './ui.js';

const STATES = [['active', 'Active', 'active'], ['deadletter', 'Dead-lettered', 'deadLetter'],
  ['scheduled', 'Scheduled', 'scheduled'], ['deferred', 'Deferred', 'deferred']];

// messagesTab pages through the messages of one state with peek (nothing
// is locked), from a sequence number, and offers resubmit and purge.
export function messagesTab(pane, ctx) {
  const st = { state: 'active', from: 1, max: 50, stack: [], next: 0, rows: [] };
  const seg = el('div', { class: 'seg', role: 'group', 'aria-label': 'Which messages' });
  const fromInput = el('input', { type: 'number', min: 1, value: '1', 'aria-label': 'From sequence number', class: 'narrow' });
  const sizeSel = el('select', { 'aria-label': 'Page size' }, [20, 50, 100, 200].map((n) => el('option', { value: String(n), selected: n === 50 }, n + ' a page')));
  const actions = el('div', { class: 'actions' });
  const body = el('tbody');
  const pager = el('div', { class: 'pager' });
  const detail = el('div', { class: 'detail', id: 'detail' });
  const selectAll = el('input', { type: 'checkbox', 'aria-label': 'Select all on this page', onchange: () => {
    for (const cb of body.querySelectorAll('input[type=checkbox]')) cb.checked = selectAll.checked;
  } });
  const headRow = el('tr');
  fill(pane, 
    el('div', { class: 'bar wrap' }, seg,
      el('form', { class: 'inline', onsubmit: (e) => { e.preventDefault(); st.stack = []; st.from = Number(fromInput.value) || 1; load(); } },
        el('label', {}, 'From #', fromInput), sizeSel, el('button', { type: 'submit', class: 'secondary' }, 'Peek'))),
    actions,
    el('div', { class: 'scroll' }, el('table', { class: 'list messages' }, el('thead', {}, headRow), body)),
    pager, detail);
  sizeSel.addEventListener('change', () => { st.max = Number(sizeSel.value); load(); });

  function drawSeg() {
    const c = ctx.info.counts;
    fill(seg, STATES.map(([id, label, key]) => el('button', {
      type: 'button', 'aria-pressed': String(st.state === id), dataset: { state: id },
      onclick: () => { st.state = id; st.from = 1; st.stack = []; fromInput.value = '1'; load(); },
    }, label + ' ', el('span', { class: 'count' }, num(c[key])))));
  }

  function drawActions() {
    const dl = st.state === 'deadletter';
    clear(actions);
    if (dl) {
      actions.append(
        el('button', { id: 'resubmit-selected', onclick: (e) => resubmit(e.currentTarget, false) }, 'Resubmit selected'),
        el('button', { id: 'resubmit-all', class: 'secondary', onclick: (e) => resubmit(e.currentTarget, true) }, 'Resubmit all'),
        el('button', { id: 'purge-dlq', class: 'danger', onclick: (e) => purge(e.currentTarget, true) }, 'Purge dead-letter queue'));
    } else if (st.state === 'active') {
      actions.append(el('button', { id: 'purge', class: 'danger', onclick: (e) => purge(e.currentTarget, false) }, 'Purge messages'));
    }
    fill(headRow, dl ? el('th', { class: 'check' }, selectAll) : null,
      ['#', 'Message id', 'Subject', dl ? 'Reason' : 'Session', 'Enqueued', 'Size', 'Deliveries'].map((h) => el('th', { scope: 'col' }, h)));
  }

  async function load() {
    drawSeg();
    drawActions();
    selectAll.checked = false;
    const res = await api('GET', 'messages', { params: { path: ctx.path, state: st.state, from: st.from, max: st.max } });
    st.next = res.next;
    st.rows = res.messages;
    clear(body);
    if (!res.messages.length) {
      body.append(el('tr', {}, el('td', { colspan: 8, class: 'muted' }, 'No messages here' + (st.from > 1 ? ' from #' + st.from : '') + '.')));
    }
    for (const m of res.messages) {
      const reason = (m.properties.find((p) => p.name === 'DeadLetterReason') || {}).value || '';
      const open = () => {
        for (const r of body.children) r.classList.remove('sel');
        row.classList.add('sel');
        showMessage(detail, m, { title: 'Message #' + m.sequenceNumber });
        detail.scrollIntoView({ block: 'nearest' });
      };
      const row = el('tr', { class: 'clickable', tabindex: 0, dataset: { seq: String(m.sequenceNumber) },
        onclick: (e) => { if (e.target.type !== 'checkbox') open(); },
        onkeydown: (e) => { if (e.key === 'Enter' || e.key === ' ') { if (e.target === row) { e.preventDefault(); open(); } } } },
      st.state === 'deadletter' ? el('td', { class: 'check' }, el('input', { type: 'checkbox', value: String(m.sequenceNumber), 'aria-label': 'Select #' + m.sequenceNumber })) : null,
      el('td', { class: 'n' }, String(m.sequenceNumber)), el('td', { class: 'mono' }, m.messageId || ''),
      el('td', {}, m.subject || ''), el('td', {}, st.state === 'deadletter' ? reason : (m.sessionId || '')),
      el('td', {}, when(st.state === 'scheduled' ? m.scheduledEnqueueTime : m.enqueuedTime)),
      el('td', { class: 'n' }, bytes(m.bodySize)), el('td', { class: 'n' }, String(m.deliveryCount)));
      body.append(row);
    }
    fill(pager, 
      el('button', { class: 'secondary small', disabled: !st.stack.length, onclick: () => { st.from = st.stack.pop(); load(); } }, '← Previous'),
      el('span', { class: 'muted' }, res.messages.length < st.max && res.next
        ? `Looked at ${num(res.scanned)} messages up to #${res.next - 1}; Next looks further.`
        : res.messages.length ? `#${res.messages[0].sequenceNumber} – #${res.messages[res.messages.length - 1].sequenceNumber}` : ''),
      el('button', { class: 'secondary small', disabled: !res.next, onclick: () => { st.stack.push(st.from); st.from = st.next; load(); } }, 'Next →'));
  }

  async function resubmit(button, all) {
    const seqs = [...body.querySelectorAll('input[type=checkbox]:checked')].map((c) => Number(c.value));
    if (!all && !seqs.length) { toast('Select messages first (the boxes on the left).', 'error'); return; }
    const target = ctx.info.kind === 'subscription' ? 'topic ' + ctx.info.topic : ctx.path;
    const what = all ? `all ${num(ctx.info.counts.deadLetter)} dead-lettered messages` : `${seqs.length} message${seqs.length > 1 ? 's' : ''}`;
    if (!await confirmAction('Resubmit', `Send ${what} back to ${target} and remove them from the dead-letter queue?`, 'Resubmit')) return;
    await busy(button, async () => {
      // "All" means those there when asked: stop once as many moved, so
      // messages dead-lettered again meanwhile do not keep it going.
      const had = ctx.info.counts.deadLetter;
      let total = 0;
      for (;;) {
        const res = await api('POST', 'resubmit', { body: all ? { path: ctx.path, all: true } : { path: ctx.path, sequences: seqs } });
        total += res.resubmitted;
        if (res.notFound && res.notFound.length) toast(`Not found (locked by someone, or gone): #${res.notFound.join(', #')}`, 'error');
        if (!res.more || total >= had) break;
      }
      toast(`Resubmitted ${num(total)} message${total === 1 ? '' : 's'} to ${target}`);
      clear(detail);
      await load();
    });
  }

  async function purge(button, deadLetter) {
    const what = deadLetter ? 'dead-letter queue of ' + ctx.path : ctx.path;
    if (!await confirmAction('Purge', `Delete every available message of the ${what}? Locked, deferred and scheduled messages stay. This cannot be undone.`, 'Purge')) return;
    await busy(button, async () => {
      // As many as there were when asked: a steady stream of new messages
      // does not keep the purge going.
      const had = deadLetter ? ctx.info.counts.deadLetter : ctx.info.counts.active;
      let total = 0;
      for (;;) {
        const res = await api('POST', 'purge', { body: { path: ctx.path, deadLetter } });
        total += res.deleted;
        if (!res.more || total >= had) break;
      }
      toast(`Purged ${num(total)} message${total === 1 ? '' : 's'}`);
      clear(detail);
      await load();
    });
  }

  ctx.refresh = () => drawSeg();
  load().catch((err) => toast(err.message, 'error'));
}

// receiveTab takes the next message (peek-lock or receive-and-delete)
// through the REST API and settles a locked one.
export function receiveTab(pane, ctx) {
  const mode = el('select', { id: 'receive-mode', 'aria-label': 'Receive mode' },
    el('option', { value: 'lock' }, 'Peek-lock (settle afterwards)'), el('option', { value: 'delete' }, 'Receive and delete'));
  const source = el('select', { id: 'receive-source', 'aria-label': 'From' },
    el('option', { value: '' }, 'the entity'), el('option', { value: '/$DeadLetterQueue' }, 'its dead-letter queue'));
  const out = el('div', { class: 'detail' });
  const button = el('button', { id: 'receive', onclick: () => busy(button, go) }, 'Receive next message');
  fill(pane, el('h2', {}, 'Receive'),
    el('p', { class: 'muted' }, ctx.info.requiresSession
      ? 'This entity requires sessions: the REST API cannot receive from it. Peek its messages instead, or use an SDK.'
      : 'Takes the next available message now, as a client would.'),
    el('div', { class: 'bar wrap' }, field('Mode', mode), field('From', source), button), out);

  async function go() {
    const path = ctx.path + source.value;
    const lock = mode.value === 'lock';
    const got = await receive(path, lock);
    clear(out);
    if (!got) { out.append(el('p', { class: 'muted', id: 'receive-empty' }, 'No message available.')); return; }
    const b = got.broker;
    if (!lock) {
      showReceived(out, got);
      toast('Received and deleted #' + b.SequenceNumber);
      return;
    }
    // The locked message as peek shows it: every property, typed.
    const res = await api('GET', 'messages', { params: { path: ctx.path, state: source.value ? 'deadletter' : 'all', from: b.SequenceNumber, max: 1 } })
      .catch(() => ({ messages: [] }));
    const m = res.messages.find((x) => x.sequenceNumber === b.SequenceNumber);
    if (m) showMessage(out, m, { title: 'Locked message #' + b.SequenceNumber });
    else showReceived(out, got);
    const reason = el('input', { id: 'dl-reason', placeholder: 'Reason (optional)', 'aria-label': 'Dead-letter reason' });
    const settle = async (btn, outcome) => busy(btn, async () => {
      if (outcome === 'complete' || outcome === 'abandon') await settleREST(path, b.MessageId, b.LockToken, outcome === 'complete');
      else await api('POST', 'settle', { body: { path, lockToken: b.LockToken, outcome, reason: reason.value, description: reason.value ? 'from the omnibus console' : '' } });
      toast(`#${b.SequenceNumber}: ${outcome === 'deadletter' ? 'dead-lettered' : outcome === 'defer' ? 'deferred' : outcome + 'd'}`);
      clear(out);
    });
    out.prepend(el('div', { class: 'actions settle' },
      el('span', { class: 'muted' }, 'Locked until ' + (b.LockedUntilUtc ? new Date(b.LockedUntilUtc).toLocaleTimeString() : '?') + ': '),
      el('button', { id: 'settle-complete', onclick: (e) => settle(e.currentTarget, 'complete') }, 'Complete'),
      el('button', { id: 'settle-abandon', class: 'secondary', onclick: (e) => settle(e.currentTarget, 'abandon') }, 'Abandon'),
      el('button', { id: 'settle-deadletter', class: 'secondary', onclick: (e) => settle(e.currentTarget, 'deadletter') }, 'Dead-letter'),
      source.value ? null : el('button', { id: 'settle-defer', class: 'secondary', onclick: (e) => settle(e.currentTarget, 'defer') }, 'Defer'),
      reason));
  }
}

// showReceived shows a message as the REST API handed it over.
function showReceived(out, got) {
  const b = got.broker;
  showMessage(out, {
    sequenceNumber: b.SequenceNumber, messageId: b.MessageId, correlationId: b.CorrelationId, sessionId: b.SessionId,
    subject: b.Label, to: b.To, replyTo: b.ReplyTo, contentType: got.contentType, enqueuedTime: b.EnqueuedTimeUtc,
    deliveryCount: b.DeliveryCount, state: b.State, timeToLive: b.TimeToLive ? b.TimeToLive + ' s' : '',
    deadLetterSource: b.DeadLetterSource, bodySize: got.bytes.length, bytes: got.bytes, properties: got.props,
  }, { title: 'Received #' + b.SequenceNumber });
}

function b64bytes(s) {
  const bin = atob(s || '');
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

// bodyViews decides how a body reads: JSON pretty-printed, text, or hex.
export function bodyViews(bytesArr) {
  const views = {};
  let text = null;
  try { text = new TextDecoder('utf-8', { fatal: true }).decode(bytesArr); } catch { /* binary */ }
  if (text !== null) {
    views.text = text;
    try {
      const t = text.trim();
      if (t.startsWith('{') || t.startsWith('[')) views.json = JSON.stringify(JSON.parse(t), null, 2);
    } catch { /* not JSON */ }
  }
  const shown = bytesArr.subarray(0, 64 * 1024);
  const lines = [];
  for (let i = 0; i < shown.length; i += 16) {
    const row = [...shown.subarray(i, i + 16)];
    lines.push(i.toString(16).padStart(8, '0') + '  ' + row.map((x) => x.toString(16).padStart(2, '0')).join(' ').padEnd(48)
      + '  ' + row.map((x) => (x >= 32 && x < 127 ? String.fromCharCode(x) : '.')).join(''));
  }
  if (bytesArr.length > shown.length) lines.push(`… ${bytesArr.length - shown.length} more bytes`);
  views.hex = lines.join('\n');
  views.default = views.json !== undefined ? 'json' : views.text !== undefined ? 'text' : 'hex';
  return views;
}

// showMessage renders a message: system properties, custom properties
// and the body, all as text.
export function showMessage(box, m, { title }) {
  const sys = [
    ['Sequence number', m.sequenceNumber], ['State', m.state], ['Message id', m.messageId], ['Correlation id', m.correlationId],
    ['Session id', m.sessionId], ['Reply-to session id', m.replyToSessionId], ['Subject (label)', m.subject], ['To', m.to],
    ['Reply to', m.replyTo], ['Content type', m.contentType], ['Content encoding', m.contentEncoding],
    ['Partition key', m.partitionKey], ['Time to live', m.timeToLive], ['Enqueued', m.enqueuedTime && when(m.enqueuedTime)],
    ['Scheduled for', m.scheduledEnqueueTime && when(m.scheduledEnqueueTime)], ['Expires', m.expiresAt && when(m.expiresAt)],
    ['Delivery count', m.deliveryCount], ['Dead-letter source', m.deadLetterSource],
    ['Enqueued sequence number', m.enqueuedSequenceNumber], ['Body', (m.bodyType === 'amqp' ? 'AMQP value, ' : '') + bytes(m.bodySize)],
  ].filter(([, v]) => v !== undefined && v !== null && v !== '' && v !== '—');
  const raw = m.bytes || b64bytes(m.body);
  const views = bodyViews(raw);
  const pre = el('pre', { class: 'body', id: 'message-body', tabindex: 0 });
  const seg = el('div', { class: 'seg', role: 'group', 'aria-label': 'Show the body as' });
  const pick = (v) => {
    pre.textContent = views[v];
    for (const b of seg.children) b.setAttribute('aria-pressed', String(b.dataset.view === v));
  };
  for (const [v, label] of [['json', 'JSON'], ['text', 'Text'], ['hex', 'Hex']]) {
    if (views[v] !== undefined) seg.append(el('button', { type: 'button', dataset: { view: v }, onclick: () => pick(v) }, label));
  }
  const props = m.properties || [];
  fill(box, el('article', { class: 'message', 'aria-label': title },
    el('h3', {}, title),
    el('div', { class: 'cols' },
      el('section', {}, el('h4', {}, 'System properties'),
        el('dl', { class: 'props' }, sys.map(([k, v]) => [el('dt', {}, k), el('dd', {}, String(v))]))),
      el('section', {}, el('h4', {}, 'Custom properties'),
        props.length ? el('table', { class: 'props', id: 'message-props' },
          el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, 'Name'), el('th', { scope: 'col' }, 'Type'), el('th', { scope: 'col' }, 'Value'))),
          el('tbody', {}, props.map((p) => el('tr', {}, el('td', { class: 'mono' }, p.name), el('td', { class: 'muted' }, p.type), el('td', { class: 'mono' }, p.value)))))
          : el('p', { class: 'muted' }, 'None.'))),
    el('div', { class: 'bar' }, el('h4', {}, 'Body'), seg), pre));
  pick(views.default);
}
