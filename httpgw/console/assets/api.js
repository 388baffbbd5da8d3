// Talking to the broker: the console's JSON API (/console/$api/...) and
// the gateway's own REST and ATOM endpoints, all with the SAS token of
// the session in the Authorization header.

const STORE = 'omnibus.console.session';
const SB_NS = 'http://schemas.microsoft.com/netservices/2010/10/servicebus/connect';
const XSI_NS = 'http://www.w3.org/2001/XMLSchema-instance';

export class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function session() {
  try {
    const s = JSON.parse(sessionStorage.getItem(STORE));
    if (s && s.token && new Date(s.expiresAt) > new Date()) return s;
  } catch { /* nothing stored */ }
  return null;
}

function token() {
  const s = session();
  return s ? s.token : '';
}

export function logout() {
  sessionStorage.removeItem(STORE);
  window.dispatchEvent(new Event('omnibus-logout'));
}

// login asks the console API to check a key (or a token) and keeps the
// token it answers for this tab.
export async function login(creds) {
  const resp = await fetch('/console/$api/login', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(creds),
  });
  if (!resp.ok) throw new HttpError(resp.status, await errorText(resp));
  const s = await resp.json();
  sessionStorage.setItem(STORE, JSON.stringify(s));
  return s;
}

// rootToken is the token the session logged in with when it may switch
// namespaces (the root key's), which a switch keeps beside the
// namespace's own token.
export function rootToken() {
  const s = session();
  return s ? (s.root || s.token) : '';
}

// switchNamespace asks for a token of another namespace with the root
// key's token and makes it this tab's session, keeping the root token to
// switch again.
export async function switchNamespace(name) {
  const root = rootToken();
  const s = await api('POST', 'namespaces/switch', { body: { namespace: name }, auth: root });
  s.root = root;
  sessionStorage.setItem(STORE, JSON.stringify(s));
  return s;
}

// errorText pulls the message out of an error answer: the console API's
// JSON, the gateway's XML <Detail>, or plain text.
async function errorText(resp) {
  const text = await resp.text();
  const ct = resp.headers.get('Content-Type') || '';
  if (ct.includes('json')) {
    try { return JSON.parse(text).error || text; } catch { /* fall through */ }
  }
  if (ct.includes('xml') || text.startsWith('<')) {
    const doc = new DOMParser().parseFromString(text, 'application/xml');
    const d = doc.getElementsByTagName('Detail')[0];
    if (d) return d.textContent;
  }
  return text || resp.statusText || ('HTTP ' + resp.status);
}

async function checked(resp) {
  if (resp.status === 401) {
    const msg = await errorText(resp);
    if (!session()) logout();
    throw new HttpError(401, msg);
  }
  if (!resp.ok) throw new HttpError(resp.status, await errorText(resp));
  return resp;
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? '?' + s : '';
}

// api calls the console's JSON API.
export async function api(method, name, { params, body, auth } = {}) {
  const headers = { Authorization: auth || token() };
  const init = { method, headers };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const resp = await checked(await fetch('/console/$api/' + name + query(params), init));
  return resp.json();
}

// entityURL is the gateway URL of an entity path ("q", "t/Subscriptions/s").
export function entityURL(path, suffix = '') {
  return '/' + path.split('/').map(encodeURIComponent).join('/') + suffix;
}

// rest calls one of the gateway's REST or ATOM endpoints.
export async function rest(method, url, { headers = {}, body, params } = {}) {
  const h = { Authorization: token(), ...headers };
  return checked(await fetch(url + query({ 'api-version': '2021-05', ...params }), { method, headers: h, body }));
}

// ---- Messages through the REST runtime API ----

// sendMessage posts one message: body, BrokerProperties and custom
// properties as typed headers (strings and dates quoted, numbers and
// booleans bare), as the REST API takes them.
export async function sendMessage(path, { body, contentType, broker, props }) {
  const headers = { 'Content-Type': contentType || 'text/plain' };
  if (Object.keys(broker).length) headers.BrokerProperties = JSON.stringify(broker);
  for (const p of props) headers[p.name] = p.wire;
  await rest('POST', entityURL(path, '/messages'), { headers, body });
}

// receive takes the next message now (timeout 0): peek-lock or
// receive-and-delete. It answers null when there is none.
export async function receive(path, lock) {
  const resp = await rest(lock ? 'POST' : 'DELETE', entityURL(path, '/messages/head'), { params: { timeout: 0 } });
  if (resp.status === 204) return null;
  const bytes = new Uint8Array(await resp.arrayBuffer());
  const broker = JSON.parse(resp.headers.get('BrokerProperties') || '{}');
  const props = [];
  resp.headers.forEach((value, name) => {
    if (!STANDARD_HEADERS.has(name.toLowerCase())) props.push({ name, type: 'header', value });
  });
  return { bytes, broker, props, contentType: resp.headers.get('Content-Type') || '' };
}

const STANDARD_HEADERS = new Set(['brokerproperties', 'content-type', 'content-length', 'date', 'server',
  'location', 'connection', 'keep-alive', 'transfer-encoding', 'cache-control', 'strict-transport-security']);

// settleREST completes (DELETE) or abandons (PUT) a locked message.
export async function settleREST(path, messageId, lockToken, complete) {
  const url = entityURL(path, '/messages/' + encodeURIComponent(messageId || 'id') + '/' + encodeURIComponent(lockToken));
  await rest(complete ? 'DELETE' : 'PUT', url);
}

// ---- Entities and rules through ATOM management ----

function descriptionOf(doc) {
  for (const name of ['QueueDescription', 'TopicDescription', 'SubscriptionDescription', 'RuleDescription']) {
    const el = doc.getElementsByTagNameNS(SB_NS, name)[0];
    if (el) return el;
  }
  return null;
}

// Elements the broker computes: never sent back on an update.
const COMPUTED = new Set(['CountDetails', 'AuthorizationRules', 'SizeInBytes', 'MessageCount', 'CreatedAt',
  'UpdatedAt', 'AccessedAt', 'EntityAvailabilityStatus', 'DefaultRuleDescription', 'IsAnonymousAccessible',
  'SubscriptionCount']);

// getEntity reads an entity's description as an ordered list of
// [name, text] pairs of its simple elements.
export async function getEntity(path) {
  const resp = await rest('GET', entityURL(path));
  const doc = new DOMParser().parseFromString(await resp.text(), 'application/xml');
  const desc = descriptionOf(doc);
  if (!desc) throw new HttpError(404, 'no description in the answer');
  const fields = [];
  for (const c of desc.children) {
    if (c.children.length === 0 && !COMPUTED.has(c.localName)) fields.push([c.localName, c.textContent]);
  }
  return { kind: desc.localName, fields };
}

// putEntity creates (or, with update, replaces) an entity from [name,
// text] pairs. The XML is built with the DOM, so text is escaped.
export async function putEntity(path, kind, fields, update) {
  const doc = document.implementation.createDocument('http://www.w3.org/2005/Atom', 'entry', null);
  const content = doc.createElementNS('http://www.w3.org/2005/Atom', 'content');
  content.setAttribute('type', 'application/xml');
  const desc = doc.createElementNS(SB_NS, kind);
  for (const [name, text] of fields) {
    if (text === '' || text === undefined) continue;
    const el = doc.createElementNS(SB_NS, name);
    el.textContent = text;
    desc.appendChild(el);
  }
  content.appendChild(desc);
  doc.documentElement.appendChild(content);
  const headers = { 'Content-Type': 'application/atom+xml;type=entry;charset=utf-8' };
  if (update) headers['If-Match'] = '*';
  await rest('PUT', entityURL(path), { headers, body: new XMLSerializer().serializeToString(doc) });
}

export async function deleteEntity(path) {
  await rest('DELETE', entityURL(path));
}

function child(el, name) {
  for (const c of el ? el.children : []) if (c.localName === name) return c;
  return null;
}

function xsiType(el) {
  const t = el ? el.getAttributeNS(XSI_NS, 'type') : '';
  return t ? t.replace(/^.*:/, '') : '';
}

// listRules reads a subscription's rules: name, filter kind and text,
// action text.
export async function listRules(subPath) {
  const resp = await rest('GET', entityURL(subPath, '/Rules'));
  const doc = new DOMParser().parseFromString(await resp.text(), 'application/xml');
  const out = [];
  for (const rd of doc.getElementsByTagNameNS(SB_NS, 'RuleDescription')) {
    const f = child(rd, 'Filter');
    const a = child(rd, 'Action');
    const kind = xsiType(f);
    let text = '';
    if (kind === 'SqlFilter') text = (child(f, 'SqlExpression') || {}).textContent || '';
    else if (kind === 'TrueFilter') text = '1=1';
    else if (kind === 'FalseFilter') text = '1=0';
    else if (kind === 'CorrelationFilter') {
      text = [...f.children].filter((c) => c.children.length === 0 && c.textContent)
        .map((c) => c.localName + " = '" + c.textContent + "'").join(' AND ');
    }
    out.push({
      name: (child(rd, 'Name') || {}).textContent || '',
      kind, filter: text,
      action: xsiType(a) === 'SqlRuleAction' ? ((child(a, 'SqlExpression') || {}).textContent || '') : '',
    });
  }
  return out;
}

// putRule creates or replaces a SQL rule.
export async function putRule(subPath, name, filter, action, update) {
  const doc = document.implementation.createDocument('http://www.w3.org/2005/Atom', 'entry', null);
  const content = doc.createElementNS('http://www.w3.org/2005/Atom', 'content');
  content.setAttribute('type', 'application/xml');
  const rd = doc.createElementNS(SB_NS, 'RuleDescription');
  const add = (parent, tag, text) => {
    const el = doc.createElementNS(SB_NS, tag);
    if (text !== undefined) el.textContent = text;
    parent.appendChild(el);
    return el;
  };
  const f = add(rd, 'Filter');
  f.setAttributeNS(XSI_NS, 'i:type', 'SqlFilter');
  add(f, 'SqlExpression', filter);
  add(f, 'CompatibilityLevel', '20');
  const a = add(rd, 'Action');
  if (action) {
    a.setAttributeNS(XSI_NS, 'i:type', 'SqlRuleAction');
    add(a, 'SqlExpression', action);
    add(a, 'CompatibilityLevel', '20');
  } else {
    a.setAttributeNS(XSI_NS, 'i:type', 'EmptyRuleAction');
  }
  add(rd, 'Name', name);
  content.appendChild(rd);
  doc.documentElement.appendChild(content);
  const headers = { 'Content-Type': 'application/atom+xml;type=entry;charset=utf-8' };
  if (update) headers['If-Match'] = '*';
  await rest('PUT', entityURL(subPath, '/Rules/' + encodeURIComponent(name)), { headers, body: new XMLSerializer().serializeToString(doc) });
}

export async function deleteRule(subPath, name) {
  await rest('DELETE', entityURL(subPath, '/Rules/' + encodeURIComponent(name)));
}
