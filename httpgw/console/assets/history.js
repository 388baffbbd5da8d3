// Samples of each entity's counts, taken at every refresh, for the live
// charts. Kept in memory for this tab only: the last 120 samples (six
// minutes at one every three seconds).
const samples = new Map();
const KEEP = 120;

// record adds a sample for each entity row the API answered.
export function record(items) {
  const t = Date.now();
  for (const it of items) {
    const c = it.counts;
    let h = samples.get(it.path);
    if (!h) { h = []; samples.set(it.path, h); }
    const last = h[h.length - 1];
    if (last && t - last.t < 1000) continue; // two views refreshing at once
    const st = it.stats;
    h.push({ t, total: c.total, active: c.active, deadLetter: c.deadLetter, scheduled: c.scheduled, size: c.sizeBytes,
      incoming: st ? st.incoming : null, outgoing: st ? st.outgoing : null });
    if (h.length > KEEP) h.shift();
  }
}

export function history(path) {
  return samples.get(path) || [];
}

// rate is the net change of the message count per second over the last
// samples ("+12.5/s"), or nothing before there are two.
export function rate(h) {
  if (h.length < 2) return '';
  const a = h[Math.max(0, h.length - 5)];
  const b = h[h.length - 1];
  const secs = (b.t - a.t) / 1000;
  if (secs <= 0) return '';
  const r = (b.total - a.total) / secs;
  if (r === 0) return '±0/s';
  return (r > 0 ? '+' : '') + (Math.abs(r) >= 10 ? r.toFixed(0) : r.toFixed(1)) + '/s';
}

// flows turns the cumulative incoming and outgoing counts of the samples
// into messages per second between each two; null when the broker keeps
// no statistics.
export function flows(h) {
  if (!h.length || h[h.length - 1].incoming === null) return null;
  const inRate = [];
  const outRate = [];
  for (let i = 1; i < h.length; i++) {
    const secs = (h[i].t - h[i - 1].t) / 1000;
    if (secs <= 0 || h[i - 1].incoming === null) continue;
    inRate.push(Math.max(0, (h[i].incoming - h[i - 1].incoming) / secs));
    outRate.push(Math.max(0, (h[i].outgoing - h[i - 1].outgoing) / secs));
  }
  return { inRate, outRate };
}

// perSec formats a rate: "12/s", "0.5/s".
export function perSec(r) {
  if (r === undefined) return '—';
  return (r >= 10 ? r.toFixed(0) : r.toFixed(1).replace(/\.0$/, '')) + '/s';
}
