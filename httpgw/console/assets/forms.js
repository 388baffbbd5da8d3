// Forms: sending a message, creating and editing entities, rules.
import { api, sendMessage, getEntity, putEntity, deleteEntity, listRules, putRule, deleteRule } from './api.js';
import { el, clear, fill, toast, busy, confirmAction, field } from './ui.js';

// ---- Send ----

const PROP_TYPES = ['string', 'int', 'double', 'bool', 'datetime'];
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

// wireValue types a custom property the way the REST API reads header
// values: strings and dates quoted, numbers and booleans bare.
function wireValue(type, v) {
  switch (type) {
    case 'string':
      if (/[\r\n]/.test(v)) throw new Error('a property value cannot hold a line break');
      return '"' + v + '"';
    case 'int':
      if (!/^-?\d+$/.test(v.trim())) throw new Error(`"${v}" is not an integer`);
      return v.trim();
    case 'double': {
      const n = Number(v);
      if (v.trim() === '' || !isFinite(n)) throw new Error(`"${v}" is not a number`);
      return Number.isInteger(n) && !/[.eE]/.test(v) ? n + '.0' : v.trim();
    }
    case 'bool':
      if (v !== 'true' && v !== 'false') throw new Error('a bool is true or false');
      return v;
    case 'datetime': {
      const d = new Date(v);
      if (isNaN(d)) throw new Error(`"${v}" is not a date`);
      return '"' + d.toUTCString() + '"';
    }
  }
  throw new Error('unknown type ' + type);
}

export function sendTab(pane, ctx) {
  const input = (id, attrs = {}) => el('input', { id, name: id, ...attrs });
  const body = el('textarea', { id: 'send-body', rows: 8, placeholder: '{"hello": "world"}', spellcheck: false });
  const ctype = input('send-content-type', { list: 'ctypes', value: 'application/json' });
  const sys = {
    MessageId: input('send-message-id', { placeholder: 'generated when empty' }),
    CorrelationId: input('send-correlation-id'),
    SessionId: input('send-session-id', { placeholder: ctx.info.requiresSession ? 'required: the entity uses sessions' : '' }),
    Label: input('send-subject'),
    To: input('send-to'),
    ReplyTo: input('send-reply-to'),
    ReplyToSessionId: input('send-reply-to-session-id'),
    PartitionKey: input('send-partition-key'),
  };
  const ttl = input('send-ttl', { type: 'number', min: 1, placeholder: 'entity default' });
  const sched = input('send-scheduled', { type: 'datetime-local', step: 1 });
  const propsBody = el('tbody');
  const addProp = (name = '', type = 'string', value = '') => {
    const row = el('tr', {},
      el('td', {}, el('input', { class: 'p-name', value: name, 'aria-label': 'Property name' })),
      el('td', {}, el('select', { class: 'p-type', 'aria-label': 'Property type' }, PROP_TYPES.map((t) => el('option', { value: t, selected: t === type }, t)))),
      el('td', {}, el('input', { class: 'p-value', value, 'aria-label': 'Property value' })),
      el('td', {}, el('button', { type: 'button', class: 'secondary small', 'aria-label': 'Remove property', onclick: () => row.remove() }, '×')));
    propsBody.append(row);
    row.querySelector('.p-name').focus();
  };
  const submit = el('button', { type: 'submit', id: 'send' }, 'Send');
  const form = el('form', {
    class: 'send', onsubmit: (e) => {
      e.preventDefault();
      busy(submit, async () => {
        const broker = {};
        for (const [k, inp] of Object.entries(sys)) if (inp.value.trim()) broker[k] = inp.value.trim();
        if (ttl.value) broker.TimeToLive = Number(ttl.value);
        if (sched.value) broker.ScheduledEnqueueTimeUtc = new Date(sched.value).toUTCString();
        const props = [];
        for (const row of propsBody.children) {
          const name = row.querySelector('.p-name').value.trim();
          if (!name) continue;
          if (!HEADER_NAME.test(name)) throw new Error(`property name "${name}" must be letters, digits and -_.!#$%&'*+^|~ (it travels as an HTTP header)`);
          const type = row.querySelector('.p-type').value;
          props.push({ name, wire: wireValue(type, row.querySelector('.p-value').value) });
        }
        await sendMessage(ctx.path, { body: body.value, contentType: ctype.value, broker, props });
        toast('Sent to ' + ctx.path);
      });
    },
  },
  el('datalist', { id: 'ctypes' }, ['application/json', 'text/plain', 'application/xml', 'application/octet-stream'].map((v) => el('option', { value: v }))),
  el('h2', {}, 'Send a message to ' + ctx.path),
  field('Body', body), field('Content type', ctype),
  el('details', {}, el('summary', {}, 'System properties'),
    el('div', { class: 'grid' }, field('Message id', sys.MessageId), field('Correlation id', sys.CorrelationId),
      field('Session id', sys.SessionId), field('Subject (label)', sys.Label), field('To', sys.To), field('Reply to', sys.ReplyTo),
      field('Reply-to session id', sys.ReplyToSessionId), field('Partition key', sys.PartitionKey),
      field('Time to live (seconds)', ttl), field('Scheduled enqueue time (local)', sched))),
  el('fieldset', {}, el('legend', {}, 'Custom properties'),
    el('table', { class: 'props edit' }, el('thead', {}, el('tr', {}, ['Name', 'Type', 'Value', ''].map((h) => el('th', { scope: 'col' }, h)))), propsBody),
    el('button', { type: 'button', class: 'secondary small', id: 'add-prop', onclick: () => addProp() }, '+ Add property')),
  el('div', { class: 'buttons' }, submit));
  fill(pane, form);
}

// ---- Entities ----

// Editable fields per kind: [element, label, input type, hint].
const DUR = 'ISO 8601 duration, e.g. PT1M, P14D';
const SIZES = '1024, 2048, 3072, 4096, 5120, 10240, 20480, 40960 or 81920';
const FIELDS = {
  QueueDescription: [
    ['LockDuration', 'Lock duration', 'text', DUR], ['MaxDeliveryCount', 'Max delivery count', 'number'],
    ['DefaultMessageTimeToLive', 'Default message time to live', 'text', DUR], ['MaxSizeInMegabytes', 'Max size (MB)', 'number', SIZES],
    ['RequiresSession', 'Requires sessions', 'bool', 'only when creating'], ['RequiresDuplicateDetection', 'Duplicate detection', 'bool', 'only when creating'],
    ['DuplicateDetectionHistoryTimeWindow', 'Duplicate detection window', 'text', DUR],
    ['DeadLetteringOnMessageExpiration', 'Dead-letter expired messages', 'bool'], ['EnableBatchedOperations', 'Batched operations', 'bool'],
    ['AutoDeleteOnIdle', 'Delete when idle for', 'text', DUR], ['ForwardTo', 'Forward to', 'text'],
    ['ForwardDeadLetteredMessagesTo', 'Forward dead letters to', 'text'], ['Status', 'Status', 'status'], ['UserMetadata', 'User metadata', 'text'],
  ],
  TopicDescription: [
    ['DefaultMessageTimeToLive', 'Default message time to live', 'text', DUR], ['MaxSizeInMegabytes', 'Max size (MB)', 'number', SIZES],
    ['RequiresDuplicateDetection', 'Duplicate detection', 'bool', 'only when creating'],
    ['DuplicateDetectionHistoryTimeWindow', 'Duplicate detection window', 'text', DUR], ['EnableBatchedOperations', 'Batched operations', 'bool'],
    ['SupportOrdering', 'Support ordering', 'bool'], ['AutoDeleteOnIdle', 'Delete when idle for', 'text', DUR],
    ['Status', 'Status', 'status'], ['UserMetadata', 'User metadata', 'text'],
  ],
  SubscriptionDescription: [
    ['LockDuration', 'Lock duration', 'text', DUR], ['MaxDeliveryCount', 'Max delivery count', 'number'],
    ['DefaultMessageTimeToLive', 'Default message time to live', 'text', DUR], ['RequiresSession', 'Requires sessions', 'bool', 'only when creating'],
    ['DeadLetteringOnMessageExpiration', 'Dead-letter expired messages', 'bool'],
    ['DeadLetteringOnFilterEvaluationExceptions', 'Dead-letter on filter errors', 'bool'], ['EnableBatchedOperations', 'Batched operations', 'bool'],
    ['AutoDeleteOnIdle', 'Delete when idle for', 'text', DUR], ['ForwardTo', 'Forward to', 'text'],
    ['ForwardDeadLetteredMessagesTo', 'Forward dead letters to', 'text'], ['Status', 'Status', 'status'], ['UserMetadata', 'User metadata', 'text'],
  ],
};

function fieldInputs(kind, values) {
  const inputs = {};
  const nodes = FIELDS[kind].map(([name, label, type, hint]) => {
    const v = values[name] ?? '';
    let c;
    if (type === 'bool') {
      c = el('select', { name }, el('option', { value: '' }, 'default'), el('option', { value: 'true', selected: v === 'true' }, 'yes'), el('option', { value: 'false', selected: v === 'false' }, 'no'));
    } else if (type === 'status') {
      c = el('select', { name }, ['', 'Active', 'Disabled', 'SendDisabled', 'ReceiveDisabled'].map((s) => el('option', { value: s, selected: s === v }, s || 'default')));
    } else {
      c = el('input', { name, type: type === 'number' ? 'number' : 'text', value: v, placeholder: 'default' });
    }
    c.id = 'f-' + name;
    inputs[name] = c;
    return field(label, c, hint);
  });
  return { inputs, nodes };
}

const KINDS = { queue: 'QueueDescription', topic: 'TopicDescription', subscription: 'SubscriptionDescription' };

// Service Bus's naming rules (core/names.go), as input patterns (valid
// with the u and v flags browsers compile them with): a queue or topic
// path of up to 260 letters, digits, '.', '-', '_' and '/', starting and
// ending with a letter or digit, without empty, '.' or '..' segments; a
// subscription or rule name of up to 50 such characters without '/'. The
// server checks the same and says why in its error.
const SEGMENT_NAME = '[A-Za-z0-9](?:[A-Za-z0-9._\\-]*[A-Za-z0-9])?';
const PATH_NAME = '(?!.*\\/\\/)(?!(?:.*\\/)?\\.\\.?(?:\\/.*)?$)[A-Za-z0-9](?:[A-Za-z0-9._\\-\\/]*[A-Za-z0-9])?';
const NAME_RULES = {
  path: { pattern: PATH_NAME, maxlength: 260, title: "Letters, digits, '.', '-', '_' and '/'; starting and ending with a letter or digit; no empty, '.' or '..' segment; up to 260 characters." },
  leaf: { pattern: SEGMENT_NAME, maxlength: 50, title: "Letters, digits, '.', '-' and '_'; starting and ending with a letter or digit; up to 50 characters." },
};

// createView is the form for a new queue, topic or subscription (of topic).
export function createView(main, kind, topic) {
  const desc = KINDS[kind];
  if (!desc) { location.hash = '#/'; return; }
  const rules = kind === 'subscription' ? NAME_RULES.leaf : NAME_RULES.path;
  const name = el('input', { id: 'new-name', required: true, autocomplete: 'off', ...rules });
  const { inputs, nodes } = fieldInputs(desc, {});
  const submit = el('button', { type: 'submit', id: 'create' }, 'Create ' + kind);
  fill(main, el('form', {
    class: 'panel', onsubmit: (e) => {
      e.preventDefault();
      busy(submit, async () => {
        const path = kind === 'subscription' ? topic + '/Subscriptions/' + name.value.trim() : name.value.trim();
        await putEntity(path, desc, Object.entries(inputs).map(([k, c]) => [k, c.value]), false);
        toast(`Created ${kind} ${path}`);
        location.hash = '#/entity/' + encodeURIComponent(path);
      });
    },
  }, el('h1', {}, kind === 'subscription' ? `New subscription of ${topic}` : 'New ' + kind),
  field('Name', name, kind === 'subscription' ? 'Letters, digits, . - and _; up to 50 characters.' : 'Letters, digits, . - _ and /; up to 260 characters.'),
  el('details', {}, el('summary', {}, 'Settings (leave empty for the defaults)'), el('div', { class: 'grid' }, nodes)),
  el('div', { class: 'buttons' }, el('a', { class: 'button secondary', href: kind === 'subscription' ? '#/entity/' + encodeURIComponent(topic) : (kind === 'topic' ? '#/topics' : '#/') }, 'Cancel'), submit)));
  name.focus();
}

// settingsTab edits or deletes the entity (ATOM GET, PUT with If-Match,
// DELETE).
export async function settingsTab(pane, ctx) {
  let got;
  try { got = await getEntity(ctx.path); } catch (err) { fill(pane, el('p', { class: 'error' }, err.message)); return; }
  const values = Object.fromEntries(got.fields);
  const { inputs, nodes } = fieldInputs(got.kind, values);
  const save = el('button', { type: 'submit', id: 'save' }, 'Save');
  const del = el('button', { type: 'button', class: 'danger', id: 'delete', onclick: async () => {
    if (!await confirmAction('Delete ' + ctx.info.kind, `Delete ${ctx.path} and every message in it? This cannot be undone.`, 'Delete')) return;
    await busy(del, async () => {
      await deleteEntity(ctx.path);
      toast('Deleted ' + ctx.path);
      location.hash = ctx.info.kind === 'subscription' ? '#/entity/' + encodeURIComponent(ctx.info.topic) : ctx.info.kind === 'topic' ? '#/topics' : '#/';
    });
  } }, 'Delete ' + ctx.info.kind);
  fill(pane, el('form', {
    onsubmit: (e) => {
      e.preventDefault();
      busy(save, async () => {
        // Every field read goes back, changed or not: an update replaces
        // the description, and what is missing would take its default.
        const fields = got.fields.map(([k, v]) => [k, k in inputs ? inputs[k].value : v]);
        for (const k of Object.keys(inputs)) if (!(k in values)) fields.push([k, inputs[k].value]);
        await putEntity(ctx.path, got.kind, fields, true);
        toast('Saved ' + ctx.path);
      });
    },
  }, el('h2', {}, 'Settings'), el('div', { class: 'grid' }, nodes), el('div', { class: 'buttons' }, del, save)));
}

// ---- Rules ----

export async function rulesTab(pane, ctx) {
  const list = el('tbody');
  const editor = el('div');
  fill(pane, el('div', { class: 'bar' }, el('h2', {}, 'Rules'),
    el('button', { id: 'add-rule', onclick: () => edit(null) }, 'Add rule')),
  el('div', { class: 'scroll' }, el('table', { class: 'list' },
    el('thead', {}, el('tr', {}, ['Name', 'Filter', 'Action', ''].map((h) => el('th', { scope: 'col' }, h)))), list)),
  editor);
  async function load() {
    const rules = await listRules(ctx.path);
    clear(list);
    if (!rules.length) list.append(el('tr', {}, el('td', { colspan: 4, class: 'muted' }, 'No rules: this subscription receives nothing.')));
    for (const r of rules) {
      list.append(el('tr', {}, el('th', { scope: 'row' }, r.name),
        el('td', { class: 'mono' }, (r.kind !== 'SqlFilter' ? r.kind + ': ' : '') + r.filter), el('td', { class: 'mono' }, r.action),
        el('td', { class: 'row-actions' },
          el('button', { class: 'secondary small', onclick: () => edit(r), 'aria-label': 'Edit rule ' + r.name }, 'Edit'),
          el('button', { class: 'danger small', 'aria-label': 'Delete rule ' + r.name, onclick: async (e) => {
            if (!await confirmAction('Delete rule', `Delete rule ${r.name}?`, 'Delete')) return;
            await busy(e.currentTarget, async () => { await deleteRule(ctx.path, r.name); toast('Deleted rule ' + r.name); await load(); });
          } }, 'Delete'))));
    }
  }
  function edit(rule) {
    const name = el('input', { id: 'rule-name', required: true, value: rule ? rule.name : '', readOnly: !!rule, ...NAME_RULES.leaf, pattern: '\\$Default|' + SEGMENT_NAME });
    const filter = el('textarea', { id: 'rule-filter', rows: 4, spellcheck: false, value: rule ? rule.filter : '1=1' });
    const action = el('textarea', { id: 'rule-action', rows: 2, spellcheck: false, value: rule ? rule.action : '', placeholder: "e.g. SET sys.Label = 'routed'" });
    const fErr = el('div', { class: 'check', id: 'filter-check', 'aria-live': 'polite' });
    const aErr = el('div', { class: 'check', id: 'action-check', 'aria-live': 'polite' });
    const save = el('button', { type: 'submit', id: 'save-rule' }, 'Save rule');
    let timer;
    let ok = true;
    const check = async () => {
      const res = await api('POST', 'filter', { body: { topic: ctx.info.topic, filter: filter.value, action: action.value } });
      ok = res.filter.ok && (!res.action || res.action.ok);
      show(fErr, res.filter, filter.value);
      show(aErr, res.action || { ok: true }, action.value);
      save.disabled = !ok;
      return ok;
    };
    const later = () => { clearTimeout(timer); timer = setTimeout(() => check().catch(() => {}), 300); };
    filter.addEventListener('input', later);
    action.addEventListener('input', later);
    fill(editor, el('form', {
      class: 'panel', onsubmit: (e) => {
        e.preventDefault();
        busy(save, async () => {
          if (!await check()) return;
          await putRule(ctx.path, name.value.trim(), filter.value, action.value.trim(), !!rule);
          toast('Saved rule ' + name.value.trim());
          clear(editor);
          await load();
        });
      },
    }, el('h3', {}, rule ? 'Edit rule ' + rule.name : 'New rule'), field('Name', name),
    field('SQL filter', filter, 'Checked by the broker\'s own parser as you type.'), fErr,
    field('Action (optional)', action), aErr,
    el('div', { class: 'buttons' }, el('button', { type: 'button', class: 'secondary', onclick: () => clear(editor) }, 'Cancel'), save)));
    (rule ? filter : name).focus();
    check().catch(() => {});
  }
  await load();
}

// show writes a check's verdict: fine, or the error with its line and
// column and the line itself with a caret under the column.
function show(box, v, src) {
  clear(box);
  box.className = 'check ' + (v.ok ? 'ok' : 'bad');
  if (v.ok) { box.textContent = src.trim() ? '✓ valid' : ''; return; }
  const where = v.line ? `Line ${v.line}, column ${v.column}: ` : '';
  box.append(el('div', { class: 'msg' }, where + v.error));
  if (v.line) {
    const line = src.split('\n')[v.line - 1] ?? '';
    box.append(el('pre', {}, line + '\n' + ' '.repeat(Math.max(0, v.column - 1)) + '^'));
  }
}
