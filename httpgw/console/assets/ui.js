// DOM helpers. Text always goes in through textContent (el's string
// children) or attributes, never parsed as HTML: whatever a message
// holds shows as text.

// el builds an element: attrs are properties or attributes (on* keys are
// listeners), children are nodes or strings (made text nodes).
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else if (k === 'value') e.value = v;
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k in e && typeof v !== 'string') e[k] = v;
    else e.setAttribute(k, v === true ? '' : v);
  }
  append(e, children);
  return e;
}

function append(e, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(e, c);
    else e.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// fill replaces node's children with children (nodes, strings, arrays).
export function fill(node, ...children) {
  clear(node);
  append(node, children);
  return node;
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

// toast shows a short message; kind is 'ok' or 'error'.
export function toast(text, kind = 'ok') {
  const box = document.getElementById('toasts');
  const t = el('div', { class: 'toast ' + kind, role: kind === 'error' ? 'alert' : 'status' }, text);
  box.appendChild(t);
  while (box.children.length > 3) box.firstChild.remove();
  setTimeout(() => t.remove(), kind === 'error' ? 8000 : 4000);
}

// confirmAction asks before something that cannot be undone.
export function confirmAction(title, text, okLabel = 'Confirm') {
  const dlg = document.getElementById('confirm');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = text;
  document.getElementById('confirm-ok').textContent = okLabel;
  return new Promise((resolve) => {
    dlg.addEventListener('close', () => resolve(dlg.returnValue === 'ok'), { once: true });
    dlg.returnValue = 'cancel';
    dlg.showModal();
    document.getElementById('confirm-cancel').focus();
  });
}

// busy disables a button while an action runs and reports its failure.
export async function busy(button, fn) {
  if (button) button.disabled = true;
  try {
    return await fn();
  } catch (err) {
    toast(err.message || String(err), 'error');
    return undefined;
  } finally {
    if (button) button.disabled = false;
  }
}

const nf = new Intl.NumberFormat();
export function num(n) { return nf.format(n || 0); }

export function bytes(n) {
  if (!n) return '0 B';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + ' ' + units[i];
}

// when formats a time from the API; the zero time shows as a dash.
export function when(t) {
  if (!t || t.startsWith('0001-')) return '—';
  const d = new Date(t);
  return isNaN(d) ? String(t) : d.toLocaleString();
}

// field wraps a control with its label.
export function field(label, control, hint) {
  const id = control.id || ('f-' + Math.random().toString(36).slice(2));
  control.id = id;
  return el('div', { class: 'field' },
    el('label', { for: id }, label), control, hint ? el('small', {}, hint) : null);
}

// sparkline draws values as an SVG polyline (no data: an empty frame).
export function sparkline(values, { width = 120, height = 28, label = '' } = {}) {
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('width', width);
  svg.setAttribute('height', height);
  svg.setAttribute('class', 'spark');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', label);
  if (values.length > 1) {
    const max = Math.max(1, ...values);
    const step = width / (values.length - 1);
    const pts = values.map((v, i) => `${(i * step).toFixed(1)},${(height - 2 - (v / max) * (height - 4)).toFixed(1)}`);
    const line = document.createElementNS(NS, 'polyline');
    line.setAttribute('points', pts.join(' '));
    svg.appendChild(line);
  }
  return svg;
}

// chart draws several series over time: an SVG that stretches to its
// box (lines keep their width), with the scale's top written beside it.
export function chart(series, { width = 1000, height = 160 } = {}) {
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.setAttribute('class', 'chart');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', series.map((s) => s.name).join(', ') + ' over time');
  const max = Math.max(1, ...series.flatMap((s) => s.values));
  const n = Math.max(...series.map((s) => s.values.length));
  series.forEach((s, k) => {
    if (s.values.length < 2) return;
    const step = width / Math.max(1, n - 1);
    const off = n - s.values.length;
    const pts = s.values.map((v, i) => `${((i + off) * step).toFixed(1)},${(height - 4 - (v / max) * (height - 12)).toFixed(1)}`);
    const line = document.createElementNS(NS, 'polyline');
    line.setAttribute('points', pts.join(' '));
    line.setAttribute('class', 'series s' + k);
    line.setAttribute('vector-effect', 'non-scaling-stroke');
    svg.appendChild(line);
  });
  return el('div', { class: 'chartbox' }, el('span', { class: 'ymax' }, num(Math.round(max))), el('span', { class: 'ymin' }, '0'), svg);
}

let stopper = () => {};

// stopLive ends the refreshing of the view shown so far.
export function stopLive() { stopper(); }

// live runs fn now and every 3 s while the view stays; a failing call
// stops nothing (the next one may work).
export function live(fn, every = 3000) {
  stopper();
  let on = true;
  const tick = async () => {
    if (!on) return;
    try { await fn(); } catch (err) { if (err.status !== 401) console.warn(err); }
    if (on) timer = setTimeout(tick, every);
  };
  let timer = setTimeout(tick, 0);
  stopper = () => { on = false; clearTimeout(timer); };
}

export function status(s) {
  return el('span', { class: 'status ' + (s === 'Active' ? 'ok' : 'off') }, s);
}

// pagerControls: "1–50 of 10,000" with previous and next.
export function pagerControls(state, total, load) {
  const from = total ? state.skip + 1 : 0;
  const to = Math.min(state.skip + state.top, total);
  return [
    el('button', { class: 'secondary small', disabled: state.skip === 0, onclick: () => { state.skip = Math.max(0, state.skip - state.top); load(); } }, '← Previous'),
    el('span', { class: 'muted' }, `${num(from)}–${num(to)} of ${num(total)}`),
    el('button', { class: 'secondary small', disabled: to >= total, onclick: () => { state.skip += state.top; load(); } }, 'Next →'),
  ];
}

