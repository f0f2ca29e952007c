// fencegate console. Plain JavaScript, no build step, nothing fetched from
// anywhere but this gateway. Every request carries the API key typed in
// the page (kept in this tab's memory only) as a bearer header; without
// one, the browser's client certificate (if any) authenticates, or auth is
// off. The event feed is Server-Sent Events read with fetch, not
// EventSource, which cannot send a header; it starts with the recent
// decisions the gateway keeps, and a reconnection resumes after the last
// event read (Last-Event-ID).
//
// Each view has a link, its address's fragment: #decisions, #resources,
// #locks, #partners, #metrics, #seed; #resources?prefix=P lists the marks
// under P (a resource's full name finds it); #decisions?prefix=P sets the
// prefix of the feed and the listings. The fragment follows the view shown,
// so the address bar is always a link to it.
'use strict';

const SVGNS = 'http://www.w3.org/2000/svg';
const MAX_ROWS = 500; // decisions kept in the table
const MAX_POINTS = 400; // points kept per resource for its chart
const MAX_CHARTS = 12; // resources charted, the most recently active

const state = {
  key: '',
  prefix: '',
  feed: null, // AbortController of the event stream
  lastEventId: '',
  history: new Map(), // resource -> [{t, token, refused}]
  routes: new Map(), // partner route -> {admitted, replayed, busy}
  find: '', // the resources view's prefix: a resource's name, or a prefix
  marksCursor: [''], // the after of each page shown
  marksNext: '',
  metricsPrev: null,
  view: 'decisions',
};

// ---------- small helpers ----------

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('data-')) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, String(v));
  }
  if (text !== undefined) e.textContent = text;
  return e;
}

function authHeaders() {
  return state.key ? { Authorization: 'Bearer ' + state.key } : {};
}

async function call(method, path, body, headers) {
  const h = Object.assign({}, authHeaders(), headers || {});
  let payload = body;
  if (body !== undefined && typeof body !== 'string') {
    h['Content-Type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  const res = await fetch(path, { method, headers: h, body: payload, cache: 'no-store' });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch (e) { /* not JSON */ }
  return { status: res.status, text, json, headers: res.headers };
}

// tokenOf reads a token from a JSON answer's text, exactly: JSON numbers
// above 2^53 lose digits in JavaScript, tokens may have 19.
function tokenOf(text, field) {
  const m = new RegExp('"' + field + '"\\s*:\\s*"?(\\d+)').exec(text);
  return m ? m[1] : '';
}

// Tokens are decimal strings; compare them as big integers.
function tokenNumber(s) { return s ? Number(s) : NaN; }

function clock(iso) {
  const d = iso ? new Date(iso) : new Date();
  return d.toISOString().slice(11, 23);
}

function problemText(r) {
  if (r.json && r.json.title) return r.json.title + (r.json.detail ? ': ' + r.json.detail : '');
  return r.text.slice(0, 200);
}

// ---------- tabs and links ----------

const VIEWS = ['decisions', 'resources', 'locks', 'partners', 'metrics', 'seed'];

// viewLink is the fragment that links to a view as it is shown now.
function viewLink(name) {
  if (name === 'resources' && state.find) return '#resources?' + new URLSearchParams({ prefix: state.find });
  if (name === 'decisions' && state.prefix) return '#decisions?' + new URLSearchParams({ prefix: state.prefix });
  return '#' + name;
}

// applyLink shows the view that the address's fragment names (a link
// opened, or pasted); an unknown one shows the decisions.
function applyLink() {
  const hash = location.hash.replace(/^#/, '');
  const q = hash.indexOf('?');
  const name = q < 0 ? hash : hash.slice(0, q);
  const params = new URLSearchParams(q < 0 ? '' : hash.slice(q + 1));
  const view = VIEWS.includes(name) ? name : 'decisions';
  if (view === 'resources') {
    const find = params.get('resource') || params.get('prefix');
    if (find !== null) {
      state.find = find;
      $('marks-find').value = find;
      state.marksCursor = [''];
    }
  }
  if (view === 'decisions' && params.has('prefix') && params.get('prefix') !== state.prefix) {
    state.prefix = params.get('prefix');
    $('prefix').value = state.prefix;
    resetDecisions();
    connectFeed();
  }
  showView(view);
}

function showView(name) {
  state.view = name;
  if (location.hash !== viewLink(name)) history.replaceState(null, '', viewLink(name));
  for (const b of document.querySelectorAll('#tabs button')) b.classList.toggle('active', b.dataset.view === name);
  for (const s of document.querySelectorAll('main > section')) s.hidden = s.id !== 'view-' + name;
  if (name === 'resources') { loadMarks(state.marksCursor[state.marksCursor.length - 1]); drawCharts(); }
  if (name === 'locks') pollLocks();
  if (name === 'partners') pollInFlight();
  if (name === 'metrics') pollMetrics();
}

// ---------- the event feed ----------

function setFeedStatus(st, text) {
  const s = $('feed-status');
  s.dataset.state = st;
  s.textContent = text;
}

function connectFeed() {
  if (state.feed) state.feed.abort();
  const ctrl = new AbortController();
  state.feed = ctrl;
  streamEvents(ctrl).catch((err) => {
    if (ctrl.signal.aborted) return;
    setFeedStatus('error', 'event feed: ' + err.message + '; retrying');
    setTimeout(() => { if (state.feed === ctrl) connectFeed(); }, 3000);
  });
}

async function streamEvents(ctrl) {
  const q = state.prefix ? '?prefix=' + encodeURIComponent(state.prefix) : '';
  const headers = Object.assign({ Accept: 'text/event-stream' }, authHeaders());
  if (state.lastEventId) headers['Last-Event-ID'] = state.lastEventId;
  setFeedStatus('connecting', 'connecting…');
  const res = await fetch('/v1/events' + q, { headers, signal: ctrl.signal, cache: 'no-store' });
  if (!res.ok) {
    const text = await res.text();
    let detail = text.slice(0, 120);
    try { const p = JSON.parse(text); detail = p.title + (p.detail ? ': ' + p.detail : ''); } catch (e) { /* plain */ }
    throw new Error(res.status + ' ' + detail);
  }
  setFeedStatus('live', 'live' + (state.prefix ? ' (prefix ' + state.prefix + ')' : ''));
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error('the stream ended');
    buf += value;
    // Events end with a blank line (LF or CRLF).
    let end;
    while ((end = buf.search(/\r?\n\r?\n/)) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end).replace(/^\r?\n\r?\n/, '');
      dispatchEvent(parseEvent(block));
    }
  }
}

function parseEvent(block) {
  const ev = { event: 'message', data: '', id: '' };
  const data = [];
  for (const line of block.split(/\r?\n/)) {
    if (line === '' || line.startsWith(':')) continue;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? '' : line.slice(i + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'event') ev.event = value;
    else if (field === 'id') ev.id = value;
  }
  ev.data = data.join('\n');
  return ev;
}

function dispatchEvent(ev) {
  if (ev.id) state.lastEventId = ev.id;
  let d;
  try { d = JSON.parse(ev.data); } catch (e) { return; }
  if (ev.event === 'gap') {
    const p = $('gap');
    p.hidden = false;
    p.textContent = d.other_run
      ? 'The feed resumed on another run of the gateway (it restarted, or this is another gateway): decisions made after the last one shown there are missing here' + (d.lost ? ', and ' + d.lost + ' more that this gateway no longer held.' : '.')
      : 'The gateway no longer held ' + d.lost + ' decisions made while this page was away: the table has a gap.';
    p.dataset.lost = String(d.lost);
    return;
  }
  if (ev.event === 'dropped') {
    const p = $('dropped');
    p.hidden = false;
    p.textContent = 'The gateway dropped ' + d.dropped + ' events for this page (it read too slowly); the table has gaps.';
    return;
  }
  if (ev.event === 'decision' || ev.event === 'message') onDecision(d);
}

function onDecision(d) {
  addDecisionRow(d);
  const kind = d.kind || '';
  if (kind.startsWith('write.') || kind === 'delete.accepted') {
    let h = state.history.get(d.resource);
    if (!h) { h = []; state.history.set(d.resource, h); }
    h.push({ t: d.time ? Date.parse(d.time) : Date.now(), token: tokenNumber(d.token), refused: kind === 'write.refused', hwm: tokenNumber(d.hwm) });
    if (h.length > MAX_POINTS) h.shift();
    // Most recently active last.
    state.history.delete(d.resource);
    state.history.set(d.resource, h);
    scheduleCharts();
  }
  if (kind.startsWith('partner.')) {
    const route = (d.resource || '').split('/')[1] || '?';
    const c = state.routes.get(route) || { admitted: 0, replayed: 0, busy: 0 };
    const what = kind.slice('partner.'.length);
    if (what in c) c[what]++;
    state.routes.set(route, c);
    if (state.view === 'partners') drawRoutes();
  }
}

// LOCK_LOST explains the kinds of a lock lost with its holder's session,
// not released: each row of one names the session, or says it is hidden
// (the feed sends a lock event's token and session only to a key that the
// lock API would show them to).
// A Map, not an object: a kind such as "constructor" is no key of it.
const LOCK_LOST = new Map([
  ['lock.expired', 'the holder\'s session expired (no keepalive within its TTL): the lock was lost, not released'],
  ['lock.revoked', 'the holder\'s session was revoked (DELETE /v1/sessions/{id}): the lock was lost, not released'],
]);

function addDecisionRow(d) {
  const kind = d.kind || '?';
  const refused = kind.endsWith('.refused');
  const accepted = kind.endsWith('.accepted') || kind === 'lock.granted' || kind === 'partner.admitted';
  let hwm = d.hwm || '';
  if (d.hwm_before && d.hwm && d.hwm_before !== d.hwm) hwm = d.hwm_before + ' → ' + d.hwm;
  const tokenCell = el('td', { class: 'mono' + (refused ? ' lag' : ''), 'data-field': 'token' }, d.token || '');
  if (refused && d.token && d.hwm) tokenCell.title = 'token ' + d.token + ' < HWM ' + d.hwm;
  let status = d.status ? String(d.status) : '';
  if (d.problem) status += ' ' + d.problem.replace(/^.*\//, '');
  if (d.waiters !== undefined) status += (status ? ' ' : '') + d.waiters + ' waiting';
  const row = el('tr', {
    class: refused ? 'refused' : (accepted ? 'accepted' : ''),
    'data-kind': kind, 'data-resource': d.resource || '', 'data-token': d.token || '', 'data-hwm': d.hwm || '', 'data-status': d.status || '',
  },
  el('td', { class: 'mono' }, clock(d.time)),
  el('td', { class: 'kind', title: LOCK_LOST.get(kind) },
    kind + (refused && d.token && d.hwm ? ': token ' + d.token + ' < HWM ' + d.hwm : '') + (LOCK_LOST.has(kind) ? ': session ' + (d.session || '(hidden)') + ' ' + kind.slice('lock.'.length) : '')),
  el('td', { class: 'mono' }, resourceLink(kind, d.resource || '')),
  tokenCell,
  el('td', { class: 'mono', 'data-field': 'hwm' }, hwm),
  el('td', {}, status),
  el('td', {}, d.caught || ''),
  el('td', {}, d.latency_ms !== undefined ? Number(d.latency_ms).toFixed(2) + ' ms' : ''),
  el('td', {}, d.identity || d.holder || ''));
  const body = $('decisions').tBodies[0];
  body.prepend(row);
  while (body.rows.length > MAX_ROWS) body.deleteRow(body.rows.length - 1);
}

// resourceLink is a decision's resource as a link to its mark in the
// resources view (a lock's, to the locks view).
function resourceLink(kind, resource) {
  if (!resource) return '';
  const href = kind.startsWith('lock.') ? '#locks' : '#resources?' + new URLSearchParams({ prefix: resource });
  return el('a', { class: 'resource', href }, resource);
}

// resetDecisions empties what the page drew from the feed, before a
// subscription that starts again from the gateway's history.
function resetDecisions() {
  state.lastEventId = '';
  $('decisions').tBodies[0].replaceChildren();
  state.history.clear();
  state.routes.clear();
  $('gap').hidden = true;
  $('dropped').hidden = true;
  drawRoutes();
}

// ---------- resources: marks, and a chart per resource ----------

async function loadMarks(after) {
  const q = new URLSearchParams({ limit: '50' });
  const prefix = state.find || state.prefix;
  if (prefix) q.set('prefix', prefix);
  if (after) q.set('after', after);
  const r = await call('GET', '/v1/fences?' + q);
  const body = $('marks').tBodies[0];
  body.replaceChildren();
  if (r.status !== 200) {
    $('marks-info').textContent = r.status + ' ' + problemText(r);
    return;
  }
  for (const m of r.json.marks) {
    body.append(el('tr', { 'data-resource': m.resource, 'data-hwm': m.hwm, class: m.resource === state.find ? 'found' : undefined },
      el('td', { class: 'mono' }, m.resource), el('td', { class: 'mono' }, m.hwm), el('td', { class: 'mono' }, m.revision)));
  }
  state.marksNext = r.json.next || '';
  $('marks-next').disabled = !state.marksNext;
  $('marks-info').textContent = 'page ' + state.marksCursor.length + ', ' + r.json.marks.length + ' marks' + (state.marksNext ? '' : ' (last page)');
}

let chartTimer = null;
function scheduleCharts() {
  if (chartTimer || state.view !== 'resources') return;
  chartTimer = setTimeout(() => { chartTimer = null; drawCharts(); }, 500);
}

function drawCharts() {
  const box = $('charts');
  box.replaceChildren();
  const entries = [...state.history.entries()].slice(-MAX_CHARTS).reverse();
  for (const [resource, points] of entries) box.append(chart(resource, points));
}

// chart draws one resource's accepted (green) and refused (red) tokens
// against time, with the high-water mark as a step line.
function chart(resource, points) {
  const W = 420, H = 180, L = 58, R = 10, T = 22, B = 24;
  const s = svg('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: 'chart', 'data-resource': resource });
  s.append(svg('text', { x: 6, y: 14 }, resource));
  if (!points.length) return s;
  const t0 = points[0].t, t1 = Math.max(points[points.length - 1].t, t0 + 1000);
  let lo = Infinity, hi = -Infinity;
  for (const p of points) {
    for (const v of [p.token, p.hwm]) if (Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  }
  if (lo === hi) { lo -= 1; hi += 1; }
  const x = (t) => L + (W - L - R) * (t - t0) / (t1 - t0);
  const y = (v) => T + (H - T - B) * (1 - (v - lo) / (hi - lo));
  s.append(svg('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis' }));
  s.append(svg('line', { x1: L, y1: T, x2: L, y2: H - B, class: 'axis' }));
  s.append(svg('text', { x: 4, y: y(hi) + 4 }, String(hi)));
  s.append(svg('text', { x: 4, y: y(lo) + 4 }, String(lo)));
  s.append(svg('text', { x: L, y: H - 6 }, new Date(t0).toISOString().slice(11, 19)));
  s.append(svg('text', { x: W - R - 48, y: H - 6 }, new Date(t1).toISOString().slice(11, 19)));
  // The high-water mark as the events told it: a step line.
  let path = '';
  for (const p of points) {
    if (!Number.isFinite(p.hwm)) continue;
    path += (path ? ` H${x(p.t).toFixed(1)} V` : `M${x(p.t).toFixed(1)},`) + y(p.hwm).toFixed(1);
  }
  if (path) s.append(svg('path', { d: path + ` H${W - R}`, class: 'hwm-line' }));
  for (const p of points) {
    if (!Number.isFinite(p.token)) continue;
    const cx = x(p.t), cy = y(p.token);
    if (p.refused) {
      const g = svg('g', { class: 'refused-dot', 'data-token': p.token });
      g.append(svg('rect', { x: cx - 3.5, y: cy - 3.5, width: 7, height: 7 }));
      s.append(g);
    } else {
      s.append(svg('circle', { cx, cy, r: 3.5, class: 'accepted-dot', 'data-token': p.token }));
    }
  }
  const n = points.filter((p) => p.refused).length;
  s.append(svg('text', { x: W - 170, y: 14 }, `${points.length - n} accepted, ${n} refused`));
  return s;
}

// ---------- locks ----------

let locksTimer = null;
async function pollLocks() {
  clearTimeout(locksTimer);
  if (state.view !== 'locks') return;
  const r = await call('GET', '/v1/locks?limit=200').catch((e) => ({ status: 0, text: e.message, json: null }));
  const body = $('locks').tBodies[0];
  body.replaceChildren();
  if (r.status !== 200) {
    body.append(el('tr', {}, el('td', { colSpan: 4 }, r.status + ' ' + problemText(r))));
  } else {
    for (const l of r.json.locks) {
      body.append(el('tr', { 'data-lock': l.name, 'data-holder': l.holder || '', 'data-queue': l.queue_length, 'data-waiters': (l.waiters || []).join(' ') },
        el('td', { class: 'mono' }, l.name),
        el('td', { class: 'mono' }, l.holder || (l.queue_length ? '(hidden)' : '')),
        el('td', {}, l.queue_length),
        el('td', { class: 'mono' }, (l.waiters || []).join(', ') || (l.queue_length > 1 ? (l.queue_length - 1) + ' (tokens hidden)' : ''))));
    }
    if (!r.json.locks.length) body.append(el('tr', {}, el('td', { colSpan: 4, class: 'hint' }, 'no lock is held')));
  }
  locksTimer = setTimeout(pollLocks, 1000);
}

// ---------- partners ----------

let inflightTimer = null;
async function pollInFlight() {
  clearTimeout(inflightTimer);
  if (state.view !== 'partners') return;
  const q = new URLSearchParams({ limit: '200' });
  if (state.prefix) q.set('prefix', state.prefix);
  const r = await call('GET', '/v1/inflight?' + q).catch((e) => ({ status: 0, text: e.message, json: null }));
  const body = $('inflight').tBodies[0];
  body.replaceChildren();
  if (r.status !== 200) {
    body.append(el('tr', {}, el('td', { colSpan: 3 }, r.status + ' ' + problemText(r))));
  } else {
    for (const m of r.json.markers) {
      body.append(el('tr', { 'data-resource': m.resource }, el('td', { class: 'mono' }, m.resource), el('td', { class: 'mono' }, m.token), el('td', { class: 'mono' }, m.revision)));
    }
    if (!r.json.markers.length) body.append(el('tr', {}, el('td', { colSpan: 3, class: 'hint' }, 'no partner request in flight')));
  }
  drawRoutes();
  inflightTimer = setTimeout(pollInFlight, 1000);
}

function drawRoutes() {
  const body = $('routes').tBodies[0];
  body.replaceChildren();
  for (const [route, c] of state.routes) {
    body.append(el('tr', { 'data-route': route }, el('td', { class: 'mono' }, route), el('td', {}, c.admitted), el('td', {}, c.replayed), el('td', {}, c.busy)));
  }
  if (!state.routes.size) body.append(el('tr', {}, el('td', { colSpan: 4, class: 'hint' }, 'no partner decision seen yet')));
}

// ---------- metrics ----------

// parseMetrics reads Prometheus' text format into samples.
function parseMetrics(text) {
  const samples = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[3]) {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
      let l;
      while ((l = re.exec(m[3]))) labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    }
    samples.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return samples;
}

function sum(samples, name, filter) {
  let s = 0;
  for (const x of samples) if (x.name === name && (!filter || filter(x.labels))) s += x.value;
  return s;
}

// buckets sums a histogram's cumulative buckets by upper bound.
function buckets(samples, name, filter) {
  const b = new Map();
  for (const x of samples) {
    if (x.name !== name + '_bucket' || (filter && !filter(x.labels))) continue;
    const le = x.labels.le === '+Inf' ? Infinity : Number(x.labels.le);
    b.set(le, (b.get(le) || 0) + x.value);
  }
  return b;
}

// quantile estimates the q-quantile from cumulative buckets, interpolating
// linearly inside the bucket, as Prometheus' histogram_quantile does.
function quantile(q, b) {
  const les = [...b.keys()].sort((a, c) => a - c);
  if (!les.length) return NaN;
  const total = b.get(les[les.length - 1]);
  if (!(total > 0)) return NaN;
  const rank = q * total;
  let prevLe = 0, prevCount = 0;
  for (const le of les) {
    const c = b.get(le);
    if (c >= rank) {
      if (le === Infinity) return prevLe;
      return prevLe + (le - prevLe) * (c - prevCount === 0 ? 0 : (rank - prevCount) / (c - prevCount));
    }
    prevLe = le; prevCount = c;
  }
  return prevLe;
}

function diffBuckets(now, prev) {
  if (!prev) return now;
  const d = new Map();
  for (const [le, c] of now) d.set(le, c - (prev.get(le) || 0));
  return d;
}

function ms(seconds) { return Number.isFinite(seconds) ? (seconds * 1000).toFixed(2) + ' ms' : '–'; }

let metricsTimer = null;
async function pollMetrics() {
  clearTimeout(metricsTimer);
  if (state.view !== 'metrics') return;
  const r = await call('GET', '/metrics').catch((e) => ({ status: 0, text: e.message }));
  const body = $('metrics').tBodies[0];
  if (r.status !== 200) {
    body.replaceChildren(el('tr', {}, el('td', { colSpan: 2 }, r.status + ' ' + r.text.slice(0, 200))));
  } else {
    const now = { t: performance.now(), samples: parseMetrics(r.text) };
    const prev = state.metricsPrev;
    const dt = prev ? (now.t - prev.t) / 1000 : NaN;
    const rate = (name, f) => (prev ? (sum(now.samples, name, f) - sum(prev.samples, name, f)) / dt : NaN);
    const isWrite = (l) => l.method === 'PUT' && (l.route || '').startsWith('/v1/objects');
    const rows = [];
    const put = (id, label, value) => rows.push(el('tr', { 'data-measure': id }, el('td', {}, label), el('td', { class: 'mono' }, value)));
    const per = (v) => (Number.isFinite(v) ? v.toFixed(1) + ' /s' : '– (next scrape)');
    put('requests_rate', 'requests', per(rate('fencegate_requests_total')));
    put('writes_accepted_rate', 'writes accepted (PUT 2xx)', per(rate('fencegate_requests_total', (l) => isWrite(l) && l.status_class === '2xx')));
    put('stale_rate', 'stale writes refused (409)', per(rate('fencegate_stale_refusals_total')));
    for (const source of ['cache', 'object', 'etcd']) {
      put('stale_' + source, '  … caught by ' + source, per(rate('fencegate_stale_refusals_total', (l) => l.source === source)));
    }
    const window = (name, f) => {
      const b = buckets(now.samples, name, f);
      const d = diffBuckets(b, prev ? buckets(prev.samples, name, f) : null);
      const inWindow = prev !== null && [...d.values()].some((c) => c > 0);
      return { p99: quantile(0.99, inWindow ? d : b), since: inWindow ? 'last interval' : 'since start' };
    };
    const all = window('fencegate_request_duration_seconds');
    put('p99_requests', 'p99 of all requests (' + all.since + ')', ms(all.p99));
    const writes = window('fencegate_request_duration_seconds', isWrite);
    put('p99_writes', 'p99 of object writes (' + writes.since + ')', ms(writes.p99));
    const fence = window('fencegate_fence_check_duration_seconds');
    put('p99_fence', 'p99 of etcd fence checks (' + fence.since + ')', ms(fence.p99));
    put('in_flight', 'requests in flight', String(sum(now.samples, 'fencegate_requests_in_flight')));
    put('lock_waiters', 'lock requests waiting', String(sum(now.samples, 'fencegate_lock_waiters')));
    put('totals', 'requests since start', String(sum(now.samples, 'fencegate_requests_total')));
    body.replaceChildren(...rows);
    state.metricsPrev = now;
  }
  metricsTimer = setTimeout(pollMetrics, 2000);
}

// ---------- the seed scenario ----------

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function runSeed(ev) {
  ev.preventDefault();
  const button = $('seed-run');
  button.disabled = true;
  $('seed-timeline').replaceChildren();
  $('seed-log').replaceChildren();
  const result = $('seed-result');
  result.textContent = 'running…';
  result.dataset.outcome = 'running';
  try {
    const run = await seedScenario(Number($('seed-ttl').value), Number($('seed-stall').value), $('seed-bucket').value.trim());
    drawTimeline(run);
    const c1 = run.c1write, c2 = run.c2write;
    if (c1 && c1.status === 409 && c2 && c2.status < 300) {
      result.dataset.outcome = 'fenced';
      result.textContent = `Client 1's write with token ${run.token1} was refused with 409: the high-water mark was already ${c1.hwm || run.token2} (client 2's). ` +
        `The store holds ${JSON.stringify(run.stored.body)} with token ${run.stored.token}.`;
    } else if (c1 && c1.status < 300 && c2 && c2.status < 300 && run.c1write.end < run.c2grant) {
      result.dataset.outcome = 'no-overlap';
      result.textContent = `Client 1 woke and wrote (token ${run.token1}) before its lease ran out or before client 2 wrote: no overlap. Make the stall longer than the TTL.`;
    } else {
      result.dataset.outcome = 'overwritten';
      result.textContent = `Unexpected: client 1 ${c1 ? c1.status : 'did not write'}, client 2 ${c2 ? c2.status : 'did not write'}.`;
    }
  } catch (err) {
    result.dataset.outcome = 'error';
    result.textContent = 'The scenario failed: ' + err.message;
  } finally {
    button.disabled = false;
  }
}

// seedScenario runs the scenario with real requests and returns when each
// step happened, in seconds from its start.
async function seedScenario(ttl, stall, bucket) {
  if (!(ttl >= 1) || !(stall >= 0) || !bucket) throw new Error('TTL ≥ 1, stall ≥ 0 and a bucket, please');
  const id = Date.now().toString(36) + Math.random().toString(36).slice(2, 6);
  const lock = 'console-seed-' + id;
  const key = 'console-seed/' + id;
  const objectPath = '/v1/objects/' + encodeURIComponent(bucket) + '/' + key;
  const t0 = performance.now();
  const T = () => (performance.now() - t0) / 1000;
  const log = (text) => $('seed-log').append(el('li', {}, `${T().toFixed(2)} s  ${text}`));
  const must = (r, what, ok) => {
    if (!ok.includes(r.status)) throw new Error(`${what}: ${r.status} ${problemText(r)}`);
    return r;
  };
  const run = { ttl, stall, lock, key, resource: 's3/' + bucket + '/' + key };

  // Client 1: a session of ttl seconds, the lock at once, then a stall:
  // no keepalive, no request, as a process stopped by a GC pause.
  const s1 = must(await call('POST', '/v1/sessions', { ttl }), 'client 1 creates a session', [201]).json.session;
  run.c1session = T();
  const g1 = must(await call('POST', '/v1/locks/' + lock, { session: s1, wait: 0 }), 'client 1 acquires', [200]);
  run.token1 = tokenOf(g1.text, 'token');
  run.c1grant = T();
  log(`client 1 holds ${lock} with token ${run.token1} (session TTL ${ttl} s), and stalls for ${stall} s`);

  const client1 = (async () => {
    await sleep(stall * 1000);
    run.c1wake = T();
    log('client 1 wakes up, still believing it holds the lock, and writes');
    const w = await call('PUT', objectPath, "client 1's report", { 'X-Fence-Token': run.token1, 'Content-Type': 'text/plain' });
    run.c1write = { start: run.c1wake, end: T(), status: w.status, hwm: tokenOf(w.text, 'high_water_mark'), problem: w.json && w.json.type };
    log(`client 1's write with token ${run.token1}: ${w.status}` + (w.status >= 400 ? ' ' + problemText(w) : ''));
  })();

  // Client 2: its own session, kept alive; waits in the queue until
  // client 1's lease expires, then writes.
  const s2ttl = Math.max(ttl, 10);
  const s2 = must(await call('POST', '/v1/sessions', { ttl: s2ttl }), 'client 2 creates a session', [201]).json.session;
  const keepalive = setInterval(() => { call('POST', '/v1/sessions/' + s2 + '/keepalive').catch(() => {}); }, (s2ttl * 1000) / 3);
  try {
    run.c2request = T();
    log('client 2 asks for the lock and waits');
    const g2 = must(await call('POST', '/v1/locks/' + lock, { session: s2, wait: Math.min(60, ttl + stall + 15) }), 'client 2 acquires', [200]);
    run.token2 = tokenOf(g2.text, 'token');
    run.c2grant = T();
    log(`client 1's lease expired; client 2 holds the lock with token ${run.token2}`);
    const w2start = T();
    const w = await call('PUT', objectPath, "client 2's report", { 'X-Fence-Token': run.token2, 'Content-Type': 'text/plain' });
    run.c2write = { start: w2start, end: T(), status: w.status };
    log(`client 2's write with token ${run.token2}: ${w.status}`);
    await client1;
    const read = await call('GET', objectPath);
    run.stored = { body: read.text, token: read.headers.get('X-Fence-Token') || '' };
    run.end = T();
    await call('DELETE', '/v1/locks/' + lock + '?token=' + run.token2);
  } finally {
    clearInterval(keepalive);
    await call('DELETE', '/v1/sessions/' + s2).catch(() => {});
    await call('DELETE', '/v1/sessions/' + s1).catch(() => {}); // long gone: 404
  }
  return run;
}

// drawTimeline draws the run: the lock's row (who holds it), client 1's
// and client 2's rows (what each believes and does), client 1's stall,
// the interval in which both believe they hold the lock, and the writes.
function drawTimeline(run) {
  const W = 920, L = 110, R = 20, rowH = 46;
  const rows = { lock: 40, c1: 40 + rowH, c2: 40 + 2 * rowH };
  const H = rows.c2 + rowH + 40;
  const tEnd = Math.max(run.end, run.c1write ? run.c1write.end : 0) * 1.04 + 0.1;
  const x = (t) => L + (W - L - R) * t / tEnd;
  const s = svg('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, id: 'seed-svg' });
  const bar = (row, from, to, cls, label, data) => {
    const g = svg('g', Object.assign({ class: cls }, data || {}));
    g.append(svg('rect', { x: x(from), y: rows[row] - 11, width: Math.max(1, x(to) - x(from)), height: 22, rx: 3 }));
    if (label) g.append(svg('text', { x: x(from) + 10, y: rows[row] + 4 }, label));
    s.append(g);
  };
  const both = run.c2grant !== undefined && run.c1write && run.c1write.end > run.c2grant;
  if (both) {
    const g = svg('g', { 'data-seed': 'both-hold' });
    g.append(svg('rect', { x: x(run.c2grant), y: rows.lock - 22, width: x(run.c1write.end) - x(run.c2grant), height: rows.c2 - rows.lock + 44, class: 'both' }));
    g.append(svg('text', { x: x(run.c2grant) + 4, y: rows.lock - 26 }, 'both believe they hold the lock'));
    s.append(g);
  }
  for (const [row, label] of [['lock', 'lock ' + ''], ['c1', 'client 1'], ['c2', 'client 2']]) {
    s.append(svg('text', { x: 8, y: rows[row] + 4 }, row === 'lock' ? 'lock' : label));
    s.append(svg('line', { x1: L, y1: rows[row], x2: W - R, y2: rows[row], class: 'axis' }));
  }
  // The lock's row: client 1 holds it until its lease expires, which the
  // gateway shows by granting it to client 2.
  bar('lock', run.c1grant, run.c2grant, 'bar-hold1', 'held by client 1 (token ' + run.token1 + ')', { 'data-seed': 'lock-c1' });
  bar('lock', run.c2grant, run.end, 'bar-hold2', 'held by client 2 (token ' + run.token2 + ')', { 'data-seed': 'lock-c2' });
  // Client 1: believes it holds the lock from its grant to the answer of
  // its write; stalls in between.
  bar('c1', run.c1grant, run.c1wake, 'bar-stall', `stalled ${run.stall} s (TTL ${run.ttl} s)`, { 'data-seed': 'stall' });
  if (run.c1write) bar('c1', run.c1wake, run.c1write.end, 'bar-hold1', '', { 'data-seed': 'c1-believes' });
  // Client 2: waits in the queue, then holds.
  bar('c2', run.c2request, run.c2grant, 'bar-wait', 'waiting', { 'data-seed': 'c2-wait' });
  bar('c2', run.c2grant, run.end, 'bar-hold2', 'holds', { 'data-seed': 'c2-holds' });
  const write = (row, w, token, who) => {
    if (!w) return;
    const refused = w.status >= 400;
    const g = svg('g', { class: refused ? 'write-refused' : 'write-ok', 'data-seed': who + '-write', 'data-status': w.status, 'data-token': token });
    const cx = x(w.end), cy = rows[row];
    if (refused) g.append(svg('path', { d: `M${cx - 7},${cy - 7} L${cx + 7},${cy + 7} M${cx - 7},${cy + 7} L${cx + 7},${cy - 7}`, stroke: 'currentColor', 'stroke-width': 3, class: 'write-refused-x' }));
    g.append(svg('circle', { cx, cy, r: 6 }));
    const text = refused ? `write, token ${token}: ${w.status} refused` + (w.hwm ? ` (HWM ${w.hwm})` : '') : `write, token ${token}: ${w.status}`;
    g.append(svg('text', { x: Math.min(cx + 10, W - 260), y: cy + 24 }, text));
    s.append(g);
  };
  write('c2', run.c2write, run.token2, 'c2');
  write('c1', run.c1write, run.token1, 'c1');
  // Time axis.
  const axisY = rows.c2 + rowH;
  s.append(svg('line', { x1: L, y1: axisY, x2: W - R, y2: axisY, class: 'axis' }));
  const step = tEnd > 20 ? 5 : (tEnd > 8 ? 2 : 1);
  for (let t = 0; t < tEnd; t += step) {
    s.append(svg('line', { x1: x(t), y1: axisY, x2: x(t), y2: axisY + 4, class: 'axis' }));
    s.append(svg('text', { x: x(t) - 6, y: axisY + 16 }, t + ' s'));
  }
  $('seed-timeline').replaceChildren(s);
}

// ---------- start ----------

function init() {
  for (const b of document.querySelectorAll('#tabs button')) b.addEventListener('click', () => showView(b.dataset.view));
  $('auth').addEventListener('submit', (e) => {
    e.preventDefault();
    state.key = $('key').value.trim();
    state.prefix = $('prefix').value.trim();
    resetDecisions();
    state.marksCursor = [''];
    connectFeed();
    showView(state.view);
  });
  $('marks-form').addEventListener('submit', (e) => {
    e.preventDefault();
    state.find = $('marks-find').value.trim();
    state.marksCursor = [''];
    showView('resources');
  });
  window.addEventListener('hashchange', applyLink);
  $('marks-first').addEventListener('click', () => { state.marksCursor = ['']; loadMarks(''); });
  $('marks-next').addEventListener('click', () => {
    if (!state.marksNext) return;
    state.marksCursor.push(state.marksNext);
    loadMarks(state.marksNext);
  });
  $('seed-form').addEventListener('submit', runSeed);
  drawRoutes();
  connectFeed();
  applyLink();
}

document.addEventListener('DOMContentLoaded', init);
