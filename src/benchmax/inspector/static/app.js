// benchmax inspector: renders every view from JSON with DOM calls only.
// Run content is untrusted: it only ever reaches the page through textContent,
// text nodes and attribute values we build; never through innerHTML.
'use strict';

(() => {
  const BOOT = JSON.parse(document.getElementById('bmx-boot').textContent);
  const STATIC = BOOT.mode === 'static';
  const ROOT = STATIC ? BOOT.root : '/';
  const app = document.getElementById('app');
  const enc = encodeURIComponent;
  const LEVELS = { DEBUG: 10, INFO: 20, WARNING: 30, ERROR: 40, CRITICAL: 50 };
  // the longest data: image shown inline (the store's MAX_IMAGE_URI_CHARS, handed over in the page)
  const IMAGE_LIMIT = Number(BOOT.image_limit) || 2000000;

  // ---------------------------------------------------------------- DOM helpers

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === 'class') el.className = value;
      else if (key === 'text') el.textContent = String(value);
      else if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
      else if (key === 'href') el.setAttribute('href', safeHref(value));
      else if (key === 'dataset') Object.assign(el.dataset, value);
      else el.setAttribute(key, value === true ? '' : String(value));
    }
    append(el, children);
    return el;
  }

  function append(el, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  function safeHref(value) {
    const text = String(value);
    return /^(\/|\.\.?\/|\?|#|blob:|[A-Za-z0-9_.-]+\.html|runs\/|index\.html)/.test(text) && !/^\/\//.test(text)
      ? text : '#';
  }

  function svg(tag, attrs, ...children) {
    const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, String(value));
    }
    append(el, children);
    return el;
  }

  function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); return el; }
  // Element.append() would print null as "null": these skip empty children.
  function put(el, ...children) { return append(clear(el), children); }
  function add(el, ...children) { return append(el, children); }

  function fmt(value, digits = 3) {
    if (value === null || value === undefined) return '—';
    if (typeof value !== 'number') return String(value);
    if (Number.isInteger(value)) return value.toLocaleString('en-US');
    return Number(value.toFixed(digits)).toString();
  }
  const pct = (value) => (value === null || value === undefined ? '—' : `${(100 * value).toFixed(1)}%`);
  const secs = (value) => (value === null || value === undefined ? '—' : value < 1 ? `${(value * 1000).toFixed(0)} ms` : `${value.toFixed(2)} s`);
  // ISO 8601 in the reader's time zone (2026-12-07 14:03:09): one order of day and month everywhere
  const date = (ts) => {
    if (!ts) return '—';
    const d = new Date(ts * 1000);
    const two = (n) => String(n).padStart(2, '0');
    return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
  };
  const signed = (value) => (value === null || value === undefined ? '—' : `${value > 0 ? '+' : ''}${fmt(value)}`);
  // Dollars: unknown (a model without a price) is never shown as $0.
  const usd = (value) => (value === null || value === undefined ? 'unknown' : value >= 1 ? `$${value.toFixed(2)}` : `$${Number(value.toFixed(6))}`);
  const calls = (n) => `${fmt(n)} ${n === 1 ? 'call' : 'calls'}`;
  const bytes = (n) => (n > 1e9 ? `${(n / 1e9).toFixed(1)} GB` : n > 1e6 ? `${(n / 1e6).toFixed(1)} MB` : `${Math.ceil(n / 1e3)} kB`);
  // "1 example", "2 examples": a count in words that agree with it
  const plural = (count, noun, many) => `${fmt(count)} ${count === 1 ? noun : many || `${noun}s`}`;

  // An example id as a person reads it: its short id (a unique prefix, as git shows commits,
  // computed by the server); links, titles and exports keep the full id.
  const shortId = (row) => row.short_id || row.example_id;
  // a group or rollout id spells its example's id inside ("eval/<id>#0"): shown with the short one
  const shortened = (id, row) => (row.short_id && row.example_id && row.short_id !== row.example_id
    ? String(id).split(row.example_id).join(row.short_id) : id);

  // An env or model name ("examples/wordcount/env.py:WordCountEnv") may wrap after a '.', '/'
  // or ':', never inside a word: the browser breaks at the <wbr> marks, and .env's
  // overflow-wrap only cuts a single part wider than the whole column.
  function nameNode(name, attrs) {
    const text = name === null || name === undefined || name === '' ? '—' : String(name);
    const parts = text.split(/(?<=[./:\\])/);
    return h('span', { class: 'env', title: name ? text : null, ...attrs }, parts.map((part, i) => (i ? [h('wbr', {}), part] : part)));
  }

  function badge(text, kind) {
    return h('span', { class: `badge ${kind || ''}`, text });
  }

  // where a run stands, in the tone the server chose (a completed run that scored nothing is 'bad')
  function statusBadge(state) {
    if (!state || !state.status) return '—';
    return badge(state.note ? `${state.status} · ${state.note}` : state.status, state.tone);
  }

  function reasonBadge(reason, scored) {
    const ok = reason === 'finished';
    return h('span', { class: `badge reason ${ok ? 'ok' : scored ? 'warn' : 'bad'}`, text: reason, title: scored ? 'scored' : 'operational failure (not scored)' });
  }

  function longText(text, limit = 1500, lines = 30) {
    text = text === null || text === undefined ? '' : String(text);
    const pre = h('pre', { class: 'text' });
    const lineCount = text.split('\n').length;
    if (text.length <= limit && lineCount <= lines) {
      pre.textContent = text;
      return pre;
    }
    let cut = text.slice(0, limit);
    cut = cut.split('\n').slice(0, lines).join('\n');
    pre.textContent = `${cut}…`;
    let open = false;
    const button = h('button', {
      class: 'more', type: 'button', text: `show all (${text.length.toLocaleString('en-US')} chars, ${lineCount} lines)`,
      onclick: () => {
        open = !open;
        pre.textContent = open ? text : `${cut}…`;
        button.textContent = open ? 'collapse' : `show all (${text.length.toLocaleString('en-US')} chars, ${lineCount} lines)`;
      },
    });
    return h('div', { class: 'collapsible' }, pre, button);
  }

  // long strings inside JSON (base64 audio, a file's bytes) are elided, never shown as a wall
  const elideLong = (key, value) => (typeof value === 'string' && value.length > 2000 ? `${value.slice(0, 120)}… (${fmt(value.length)} chars elided)` : value);

  function prettyJson(value) {
    if (typeof value === 'string') {
      try { return { text: JSON.stringify(JSON.parse(value), elideLong, 2), valid: true }; } catch (_) { return { text: value, valid: false }; }
    }
    return { text: JSON.stringify(value, elideLong, 2), valid: true };
  }

  // A tool result that is a JSON object or array, pretty-printed as arguments are; other text as it is.
  function jsonOrText(text) {
    const trimmed = String(text).trim();
    if (!/^[[{]/.test(trimmed)) return null;
    const parsed = prettyJson(trimmed);
    return parsed.valid ? parsed.text : null;
  }

  // ---------------------------------------------------------------- images

  const DATA_IMAGE = /^data:image\/(png|jpeg|jpg|gif|webp|bmp|avif);base64,[A-Za-z0-9+/=\s]*$/i;

  function imageUrl(part) {
    const spec = part.image_url;
    if (typeof spec === 'string') return spec;
    return spec && typeof spec.url === 'string' ? spec.url : '';
  }

  // An OpenAI image content part. A base64 data: image within the bound is drawn in an <img>
  // (the page's CSP allows img-src data:), its rendered size capped by CSS; a remote URL is a
  // link the page never fetches; anything else (javascript:, an oversized or non-image data URI)
  // is described in text.
  function imageNode(part) {
    const url = imageUrl(part);
    const note = (text) => h('div', { class: 'image-part elided', role: 'img', 'aria-label': text }, h('span', { class: 'image-icon', text: '🖼' }), ' ', text);
    if (/^data:/i.test(url)) {
      if (url.length > IMAGE_LIMIT) return note(`image not shown: its data URI is ${bytes(url.length)}, over the ${bytes(IMAGE_LIMIT)} bound`);
      if (!DATA_IMAGE.test(url)) return note(`image not shown: not a base64 PNG, JPEG, GIF or WebP data URI (${url.slice(0, 40)}…)`);
      const img = h('img', { class: 'content-image', alt: 'image from the transcript', decoding: 'async' });
      img.setAttribute('src', url);
      const caption = h('figcaption', { class: 'muted small', text: `${url.slice(5, url.indexOf(';'))} · ${bytes(url.length)}` });
      img.addEventListener('load', () => { caption.textContent = `${img.naturalWidth}×${img.naturalHeight} ${caption.textContent}`; });
      return h('figure', { class: 'image-part' }, img, caption);
    }
    let parsed = null;
    try { parsed = new URL(url); } catch (_) { parsed = null; }
    if (parsed && (parsed.protocol === 'http:' || parsed.protocol === 'https:')) {
      const anchor = h('a', { class: 'remote-image', rel: 'noopener noreferrer nofollow', target: '_blank', referrerpolicy: 'no-referrer', text: url.length > 120 ? `${url.slice(0, 120)}…` : url });
      anchor.setAttribute('href', parsed.href);  // checked above: http(s) only
      return h('div', { class: 'image-part remote' }, h('span', { class: 'image-icon', text: '🖼' }), ' remote image (not loaded): ', anchor);
    }
    return note(`image with an unsupported URL: ${url.length > 80 ? `${url.slice(0, 80)}…` : url || '(none)'}`);
  }

  // ---------------------------------------------------------------- links and data

  function fileName(value) {
    let out = '';
    for (const byte of new TextEncoder().encode(String(value))) {
      const ch = String.fromCharCode(byte);
      out += /[A-Za-z0-9_-]/.test(ch) ? ch : `.${byte.toString(16).toUpperCase().padStart(2, '0')}`;
    }
    return out;
  }

  const link = {
    runs: () => (STATIC ? `${ROOT}index.html` : '/'),
    run: (run, query) => (STATIC ? `${ROOT}runs/${fileName(run)}/index.html` : `/runs/${enc(run)}${query ? `?${query}` : ''}`),
    group: (run, id) => (STATIC ? `${ROOT}runs/${fileName(run)}/groups/${fileName(id)}.html` : `/runs/${enc(run)}/groups/${enc(id)}`),
    rollout: (run, id) => (STATIC ? `${ROOT}runs/${fileName(run)}/rollouts/${fileName(id)}.html` : `/runs/${enc(run)}/rollouts/${enc(id)}`),
    compare: (a, b) => `/compare?a=${enc(a)}&b=${enc(b)}`,
  };

  async function api(path, params) {
    const query = params ? new URLSearchParams(params).toString() : '';
    const response = await fetch(`/api${path}${query ? `?${query}` : ''}`, { headers: { Accept: 'application/json' }, credentials: 'same-origin' });
    let body;
    try { body = await response.json(); } catch (_) { body = { error: response.statusText }; }
    if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
    return body;
  }

  // The static bundle answers the table queries in the browser, from the store's one
  // declaration of each table's parameters (QUERY_SPEC, shipped in the page): every
  // filter and sort the server understands is applied here with the same meaning.
  const fold = (text) => String(text).toLowerCase().normalize('NFKD').replace(/\p{M}/gu, '');
  const words = (text) => fold(text).match(/[\p{L}\p{N}]+/gu) || [];
  const given = (value) => value !== undefined && value !== null && value !== '' && !(Array.isArray(value) && !value.length);
  const FILTERS = {
    in: (f, value) => { const wanted = [].concat(value).filter(given); return (row) => wanted.includes(row[f.field]); },
    eq: (f, value) => (row) => row[f.field] === value,
    number: (f, value) => (row) => row[f.field] === Number(value),
    flag: (f, value) => (value === '1' || value === '0' ? (row) => Boolean(row[f.field]) === ((value === '1') === f.true_means) : null),
    component_range: (f, value, params) => (row) => {
      const entry = (row.rewards || {})[value];
      return Boolean(entry) && (!given(params[f.low]) || entry.value >= Number(params[f.low]))
        && (!given(params[f.high]) || entry.value <= Number(params[f.high]));
    },
    // each word of the query begins a word of the row (rows carry their words, folded as the index folds them)
    words: (f, value) => { const wanted = words(value); return (row) => wanted.length > 0 && wanted.every((w) => (row.words || []).some((have) => have.startsWith(w))); },
    contains: (f, value) => { const q = String(value).toLowerCase(); return (row) => f.fields.some((name) => given(row[name]) && String(row[name]).toLowerCase().includes(q)); },
  };

  function compareValues(x, y, desc) {
    const xNull = x === null || x === undefined;
    const yNull = y === null || y === undefined;
    if (xNull || yNull) return xNull === yNull ? 0 : xNull ? 1 : -1;  // nulls last either way
    if (x === y) return 0;
    return (x < y ? -1 : 1) * (desc ? -1 : 1);
  }

  function specPage(kind, rows, params) {
    const spec = BOOT.data.overview.query_spec[kind];
    let kept = rows;
    for (const f of spec.filters) {
      if (!given(params[f.param])) continue;
      const test = FILTERS[f.op](f, params[f.param], params);
      if (test) kept = kept.filter(test);
    }
    const sort = params.sort || spec.default_sort;
    const desc = params.desc === '1';
    const prefix = spec.component_sort;
    const keys = prefix && sort.startsWith(prefix) && sort.length > prefix.length
      ? [(row) => ((row.rewards || {})[sort.slice(prefix.length)] || {}).value]
      : (spec.sorts[sort] || spec.sorts[spec.default_sort]).map((key) => (row) => row[key]);
    keys.push((row) => row[spec.tiebreak]);
    kept = kept.slice().sort((a, b) => {
      for (const key of keys) {
        const order = compareValues(key(a), key(b), desc);
        if (order) return order;
      }
      return 0;
    });
    const offset = Number(params.offset || 0);
    const limit = Number(params.limit || 50);
    return { rows: kept.slice(offset, offset + limit), total: kept.length, offset, limit };
  }

  const data = {
    runs: () => (STATIC ? BOOT.data : api('/runs')),
    overview: (run) => (STATIC ? BOOT.data.overview : api(`/runs/${enc(run)}/overview`)),
    distributions: (run) => (STATIC ? BOOT.data.overview.distributions : api(`/runs/${enc(run)}/distributions`)),
    progress: (run) => api(`/runs/${enc(run)}/progress`),
    steps: (run) => (STATIC ? { steps: BOOT.data.steps || [] } : api(`/runs/${enc(run)}/steps`)),
    rollouts: (run, params) => (STATIC ? specPage('rollouts', BOOT.data.rollouts, params) : api(`/runs/${enc(run)}/rollouts`, params)),
    examples: (run, params) => (STATIC ? specPage('examples', BOOT.data.examples, params) : api(`/runs/${enc(run)}/examples`, params)),
    groups: (run, params) => (STATIC ? specPage('groups', BOOT.data.groups, params) : api(`/runs/${enc(run)}/groups`, params)),
    group: (run, id) => (STATIC ? BOOT.data : api(`/runs/${enc(run)}/groups/${enc(id)}`)),
    rollout: (run, id) => (STATIC ? BOOT.data : api(`/runs/${enc(run)}/rollouts/${enc(id)}`)),
    compare: (params) => api('/compare', params),
  };

  function route() {
    const params = Object.fromEntries(new URLSearchParams(location.search));
    if (STATIC) return { view: BOOT.view, run: BOOT.run, params };
    const path = location.pathname;
    let m;
    if ((m = path.match(/^\/runs\/([^/]+)\/groups\/(.+)$/))) return { view: 'group', run: decodeURIComponent(m[1]), id: decodeURIComponent(m[2]), params };
    if ((m = path.match(/^\/runs\/([^/]+)\/rollouts\/(.+)$/))) return { view: 'rollout', run: decodeURIComponent(m[1]), id: decodeURIComponent(m[2]), params };
    if ((m = path.match(/^\/runs\/([^/]+)\/?$/))) return { view: 'run', run: decodeURIComponent(m[1]), params };
    if (path === '/compare') return { view: 'compare', params };
    return { view: 'runs', params };
  }

  function crumbs(...items) {
    const nav = clear(document.getElementById('crumbs'));
    items.forEach(([label, href], i) => {
      if (i) nav.append(h('span', { class: 'sep', text: '/' }));
      nav.append(href ? h('a', { href, text: label }) : h('span', { class: 'here', text: label }));
    });
    document.title = `${items.length ? items[items.length - 1][0] : 'runs'} · benchmax inspector`;
  }

  function setQuery(params) {
    if (STATIC && location.protocol === 'file:') return;
    const clean = Object.fromEntries(Object.entries(params).filter(([, v]) => v !== '' && v !== undefined && v !== null));
    const query = new URLSearchParams(clean).toString();
    history.replaceState(null, '', `${location.pathname}${query ? `?${query}` : ''}`);
  }

  function failure(error) {
    return h('div', { class: 'error-box', role: 'alert' }, h('strong', { text: 'Could not load: ' }), String(error.message || error));
  }

  // ---------------------------------------------------------------- tables

  // columns: [{key, label, sort, num, render(row)}]; state: {sort, desc}; onSort(key)
  // a table read whole on a phone: its headers and names wrap instead of scrolling it sideways
  function fitted(grid) {
    grid.classList.add('fit');
    return grid;
  }

  function table(columns, rows, state, onSort, rowClass) {
    const head = h('tr', {}, columns.map((col) => {
      const active = state && col.sort && state.sort === col.sort;
      const th = h('th', { class: `${col.num ? 'num' : ''} ${col.sort ? 'sortable' : ''} ${active ? 'active' : ''}`, title: col.title || null, scope: 'col' },
        col.label, active ? h('span', { class: 'arrow', text: state.desc ? ' ▼' : ' ▲' }) : null);
      if (col.sort && onSort) {
        th.tabIndex = 0;
        th.addEventListener('click', () => onSort(col.sort));
        th.addEventListener('keydown', (event) => { if (event.key === 'Enter') onSort(col.sort); });
      }
      return th;
    }));
    const body = h('tbody', {}, rows.map((row) => h('tr', { class: rowClass ? rowClass(row) : null },
      columns.map((col) => h('td', { class: col.num ? 'num' : null }, col.render(row))))));
    if (!rows.length) body.append(h('tr', {}, h('td', { colspan: columns.length, class: 'muted empty', text: 'Nothing matches.' })));
    return h('table', { class: 'grid' }, h('thead', {}, head), body);
  }

  function pager(page, onOffset) {
    const { offset, limit, total } = page;
    const last = Math.max(0, Math.floor((total - 1) / limit) * limit);
    return h('div', { class: 'pager' },
      h('button', { type: 'button', disabled: offset <= 0, onclick: () => onOffset(0), text: '«', title: 'first page' }),
      h('button', { type: 'button', disabled: offset <= 0, onclick: () => onOffset(Math.max(0, offset - limit)), text: '‹ prev' }),
      h('span', { class: 'muted', text: total ? `${fmt(offset + 1)}–${fmt(Math.min(total, offset + limit))} of ${fmt(total)}` : '0 rows' }),
      h('button', { type: 'button', disabled: offset + limit >= total, onclick: () => onOffset(offset + limit), text: 'next ›' }),
      h('button', { type: 'button', disabled: offset >= last, onclick: () => onOffset(last), text: '»', title: 'last page' }));
  }

  function componentCell(entry) {
    if (!entry) return h('span', { class: 'muted', text: '—' });
    return h('span', { class: entry.filled ? 'filled' : null, title: entry.filled ? 'filled with 0 by the batch zero-fill (not emitted by the env)' : 'emitted by the env' },
      fmt(entry.value), entry.filled ? h('sup', { text: 'fill' }) : null);
  }

  // A run of several envs (a mixture): its suite (one row per env, from the store) has more than
  // one row. Only then do pages name each rollout's env; a run of one env reads as it always has.
  const severalEnvs = (suite) => Array.isArray(suite) && suite.filter(Boolean).length > 1;

  // An env's mean of a component: blank (never 0) where the env does not emit that component.
  function envMean(figures, name) {
    const components = (figures && figures.components) || {};
    if (!Object.prototype.hasOwnProperty.call(components, name)) return h('span', { class: 'muted', text: '—', title: `no ${name} in this env` });
    return fmt(components[name]);
  }

  // every component any of the rows' envs emits, in name order
  const componentUnion = (rows) => [...new Set(rows.flatMap((row) => Object.keys((row && row.components) || {})))].sort();

  // ---------------------------------------------------------------- charts

  // Bars of a histogram. Heights are proportional to counts (a non-empty bar is at least 1.5
  // units tall, so it stays visible). When the values are few and discrete (the store sends
  // one bar per value for <= 20 distinct values) and their labels fit, each bar is labelled
  // with its value below and its count above; otherwise the axis shows the range.
  function histogram(title, bars, { onPick, unit } = {}) {
    const width = 260;
    const height = 84;
    const discrete = bars.length > 0 && bars.length <= 20 && bars.every((bar) => bar.low === bar.high);
    const step = bars.length ? width / bars.length : width;
    // each value is labelled only when every label fits under its own bar (a 9px digit is about
    // 5.5 units wide); else the axis shows the first and last value, like a range's, and each
    // bar's value is in its tooltip: slanted or crowded labels ran into each other
    const widest = Math.max(0, ...bars.map((bar) => fmt(bar.low).length));
    const labelled = discrete && widest * 5.5 <= step - 2;
    const counted = discrete && String(Math.max(0, ...bars.map((bar) => bar.count))).length * 5 <= step - 1;
    const top = counted ? 12 : 0;
    const bottom = 16;
    const max = Math.max(1, ...bars.map((bar) => bar.count));
    const chart = svg('svg', { viewBox: `0 0 ${width} ${top + height + bottom}`, class: 'hist', role: 'img', 'aria-label': title });
    bars.forEach((bar, i) => {
      const barHeight = bar.count ? Math.max(1.5, (bar.count / max) * height) : 0;
      const label = bar.low === bar.high ? fmt(bar.low) : `${fmt(bar.low)} – ${fmt(bar.high)}`;
      const middle = i * step + step / 2;
      const rect = svg('rect', { x: i * step + 1, y: top + height - barHeight, width: Math.max(1, step - 2), height: barHeight, class: onPick ? 'bar pick' : 'bar', 'data-count': bar.count, 'data-value': label },
        svg('title', {}, `${label}${unit || ''}: ${fmt(bar.count)}`));
      if (onPick) rect.addEventListener('click', () => onPick(bar));
      chart.append(rect);
      if (counted) chart.append(svg('text', { x: middle, y: top + height - barHeight - 2, class: 'axis count', 'text-anchor': 'middle' }, fmt(bar.count)));
      if (labelled) chart.append(svg('text', { x: middle, y: top + height + 12, class: 'axis value', 'text-anchor': 'middle' }, label));
    });
    // ranges: the axis shows where it starts and ends (each bar's own range is in its tooltip);
    // a label per bar ("1.234 – 5.678") would overlap its neighbours
    if (!labelled && bars.length) {
      chart.append(svg('text', { x: 0, y: top + height + 13, class: 'axis' }, fmt(bars[0].low)));
      chart.append(svg('text', { x: width, y: top + height + 13, class: 'axis', 'text-anchor': 'end' }, fmt(bars[bars.length - 1].high)));
    }
    return h('figure', { class: 'card chart' }, h('figcaption', { text: title }), bars.length ? chart : h('p', { class: 'muted', text: 'no values yet' }));
  }

  function lineChart(title, points) {
    const kept = points.filter(([, y]) => y !== null && Number.isFinite(y));
    const width = 260;
    const height = 84;
    const chart = svg('svg', { viewBox: `0 0 ${width} ${height + 16}`, class: 'hist', role: 'img', 'aria-label': title });
    if (kept.length) {
      const xs = kept.map(([x]) => x);
      const ys = kept.map(([, y]) => y);
      const [x0, x1] = [Math.min(...xs), Math.max(...xs)];
      const [y0, y1] = [Math.min(0, ...ys), Math.max(1e-9, ...ys)];
      const px = (x) => (x1 === x0 ? width / 2 : ((x - x0) / (x1 - x0)) * (width - 4) + 2);
      const py = (y) => height - ((y - y0) / (y1 - y0)) * (height - 4) - 2;
      // the area under the line reaches down to the baseline (0, or the lowest value below it);
      // the line itself is never filled (a filled polyline closes first-to-last)
      const line = kept.map(([x, y]) => `${px(x)},${py(y)}`);
      const base = py(Math.max(y0, 0));
      chart.append(svg('polygon', { points: [`${px(kept[0][0])},${base}`, ...line, `${px(kept[kept.length - 1][0])},${base}`].join(' '), class: 'area' }));
      chart.append(svg('polyline', { points: line.join(' '), class: 'line' }));
      for (const [x, y] of kept) chart.append(svg('circle', { cx: px(x), cy: py(y), r: 1.8, class: 'bar' }, svg('title', {}, `step ${x}: ${fmt(y)}`)));
      chart.append(svg('text', { x: 0, y: height + 13, class: 'axis' }, `step ${x0}`));
      chart.append(svg('text', { x: width, y: height + 13, class: 'axis', 'text-anchor': 'end' }, `step ${x1} · ${fmt(y0)}–${fmt(y1)}`));
    }
    return h('figure', { class: 'card chart' }, h('figcaption', { text: title }), kept.length ? chart : h('p', { class: 'muted', text: 'no values yet' }));
  }

  function statCard(label, value, sub, onClick) {
    const card = h('div', { class: `card stat ${onClick ? 'clickable' : ''}` }, h('div', { class: 'label', text: label }), h('div', { class: 'value', text: value }), sub ? h('div', { class: 'sub', text: sub }) : null);
    if (onClick) card.addEventListener('click', onClick);
    return card;
  }

  // ---------------------------------------------------------------- runs list

  // A rescored run: its own creation time is its 'created'; this says whose transcripts it scored.
  function rescoreNote(rescore) {
    if (!rescore) return null;
    const source = rescore.source || 'another run';
    return h('span', { class: 'rescore-note', title: rescore.source_created_at ? `source created ${date(rescore.source_created_at)}` : null },
      badge('rescore', 'info'), ' of ', rescore.run_id ? h('a', { href: link.run(rescore.run_id), text: source }) : h('span', { class: 'id', text: source }));
  }

  // Each run's own reward components, compactly (runs of different envs have different ones).
  function componentMeans(components) {
    const names = Object.keys(components || {}).sort();
    if (!names.length) return h('span', { class: 'muted', text: '—' });
    return h('span', { class: 'components' }, names.map((name) => h('span', { class: 'component', title: `mean of ${name}` },
      h('span', { class: 'name', text: name }), ' ', h('span', { class: 'value', text: fmt(components[name]) }))));
  }

  const RUN_SORTS = {
    run: (run) => run.run_id, env: (run) => run.env, model: (run) => run.model, created: (run) => run.created_at,
    status: (run) => (run.state || {}).status, rollouts: (run) => run.rollouts, size: (run) => run.bytes,
    pass_rate: (run) => run.pass_rate, failure_rate: (run) => run.failure_rate,
  };

  async function runsView(r) {
    crumbs(['runs', null]);
    const body = await data.runs();
    const runs = body.runs;
    const params = (r && r.params) || {};
    const state = { sort: RUN_SORTS[params.sort] ? params.sort : 'created', desc: params.sort ? params.desc === '1' : true };
    // A/B are explicit: A is the baseline (the older of the two picked, until swapped), B is compared against it
    const picked = [];
    const byId = new Map(runs.map((run) => [run.run_id, run]));
    const pickLine = h('div', { class: 'pick-line', 'aria-live': 'polite' });
    const compareButton = h('button', { type: 'button', class: 'primary', disabled: true, text: 'Compare selected (pick 2)' });
    compareButton.addEventListener('click', () => { if (picked.length === 2) location.href = link.compare(picked[0], picked[1]); });
    const swapButton = h('button', { type: 'button', text: '⇄ swap A and B', disabled: true, onclick: () => { picked.reverse(); drawPick(); } });
    function drawPick() {
      const ready = picked.length === 2;
      compareButton.disabled = !ready;
      swapButton.disabled = !ready;
      compareButton.textContent = ready ? 'Compare selected' : 'Compare selected (pick 2)';
      put(pickLine, ready
        ? [h('span', { class: 'ab' }, h('strong', { text: 'A' }), ' (baseline): ', h('span', { class: 'id', dataset: { side: 'a' }, text: picked[0] })),
          h('span', { class: 'ab' }, h('strong', { text: 'B' }), ': ', h('span', { class: 'id', dataset: { side: 'b' }, text: picked[1] })),
          h('span', { class: 'muted', text: 'deltas are B − A' })]
        : h('span', { class: 'muted', text: picked.length ? `picked ${picked[0]}: pick one more run` : 'pick two runs to compare them' }));
    }
    function pick(runId, on) {
      const at = picked.indexOf(runId);
      if (on && at < 0) picked.push(runId);
      if (!on && at >= 0) picked.splice(at, 1);
      if (picked.length === 2) {
        const created = (id) => (byId.get(id) || {}).created_at || 0;
        picked.sort((x, y) => created(x) - created(y) || (x < y ? -1 : 1));
      }
      drawPick();
    }
    const columns = [
      ...(STATIC ? [] : [{ label: '', render: (run) => {
        const box = h('input', { type: 'checkbox', 'aria-label': `select ${run.run_id}`, checked: picked.includes(run.run_id), onchange: (event) => {
          if (event.target.checked && picked.length >= 2) { event.target.checked = false; return; }
          pick(run.run_id, event.target.checked);
        } });
        return box;
      } }]),
      { label: 'run', sort: 'run', render: (run) => h('span', { class: 'run-cell' }, h('a', { href: link.run(run.run_id), class: 'run-link', text: run.run_id }), rescoreNote(run.rescore)) },
      { label: 'env', sort: 'env', render: (run) => run.error ? h('span', { class: 'bad', text: run.error }) : nameNode(run.env) },
      { label: 'model', sort: 'model', render: (run) => nameNode(run.model) },
      { label: 'created', sort: 'created', num: true, render: (run) => date(run.created_at) },
      { label: 'status', sort: 'status', render: (run) => statusBadge(run.state) },
      { label: 'rollouts', sort: 'rollouts', num: true, render: (run) => fmt(run.rollouts) },
      { label: 'size', sort: 'size', num: true, render: (run) => (run.bytes ? bytes(run.bytes) : '—') },
      { label: 'reward components (mean)', render: (run) => componentMeans(run.components) },
      { label: 'pass rate', sort: 'pass_rate', num: true, render: (run) => pct(run.pass_rate) },
      { label: 'failure rate', sort: 'failure_rate', num: true, render: (run) => h('span', { class: run.failure_rate > 0 ? 'warn-text' : null, text: pct(run.failure_rate) }) },
    ];
    const holder = h('div', { class: 'scroll runs-table' });
    function drawTable() {
      const key = RUN_SORTS[state.sort];
      const sorted = runs.slice().sort((x, y) => compareValues(key(x), key(y), state.desc) || compareValues(x.run_id, y.run_id, false));
      put(holder, table(columns, sorted, state, (sort) => {
        state.desc = state.sort === sort ? !state.desc : ['created', 'rollouts', 'size', 'pass_rate', 'failure_rate'].includes(sort);
        state.sort = sort;
        setQuery({ sort: state.sort, desc: state.desc ? '1' : '0' });
        drawTable();
      }));
    }
    drawTable();
    drawPick();
    put(app,
      h('section', { class: 'head' }, h('h1', { text: 'Runs' }), h('p', { class: 'muted', text: body.root ? `in ${body.root}` : '' })),
      runs.length ? holder : h('p', { class: 'empty-state', text: 'No runs here yet. Start one with benchmax eval, then reload.' }),
      STATIC ? null : h('div', { class: 'toolbar' }, pickLine, swapButton, compareButton));
  }

  // ---------------------------------------------------------------- compare

  async function compareView(r) {
    const params = { sort: 'delta', desc: '1', offset: '0', limit: '50', ...r.params };
    crumbs(['runs', link.runs()], [`compare A ${params.a} · B ${params.b}`, null]);
    const result = await data.compare(params);
    const { a, b } = result;
    const headline = result.headline;
    const deltaCell = (value, show = signed) => h('span', { class: value > 0 ? 'up' : value < 0 ? 'down' : 'muted', text: show(value) });
    const points = (value) => (value === null || value === undefined ? '—' : `${value > 0 ? '+' : ''}${(100 * value).toFixed(1)} pp`);
    // env code or data that differ between the runs: a delta may come from them, not from the model
    const differs = (result.provenance || []).filter((change) => change.warning);
    const provenanceNote = differs.length ? h('div', { class: 'card provenance-warning' },
      h('strong', { class: 'warn-text', text: 'the runs differ in env code or data: deltas may come from these changes, not only from the model' }),
      h('ul', {}, ...differs.map((change) => h('li', { text: change.text })))) : null;
    const env = result.env || {};
    const swap = h('a', { href: link.compare(b, a), class: 'button', text: '⇄ swap A and B', title: `make ${b} the baseline` });
    const sides = h('div', { class: 'ab-line' },
      h('span', { class: 'ab' }, h('strong', { text: 'A' }), ' (baseline): ', h('a', { href: link.run(a), class: 'id', dataset: { side: 'a' }, text: a }), env.a ? h('span', { class: 'muted' }, ' · ', nameNode(env.a)) : null),
      h('span', { class: 'ab' }, h('strong', { text: 'B' }), ': ', h('a', { href: link.run(b), class: 'id', dataset: { side: 'b' }, text: b }), env.b ? h('span', { class: 'muted' }, ' · ', nameNode(env.b)) : null),
      swap);
    const counts = `${plural(result.common, 'common example')} · ${fmt(result.only_a)} only in A · ${fmt(result.only_b)} only in B`;
    const warnings = [
      env.same === false ? h('div', { class: 'warn-box', role: 'note', text: `A and B are runs of different envs (${env.a} and ${env.b}): their rewards may not mean the same.` }) : null,
    ];
    const head = h('section', { class: 'head' }, h('h1', { text: 'Compare runs' }), sides, h('p', { class: 'muted', text: 'Deltas are B − A; examples are matched by id.' }));
    if (!result.comparable) {
      // nothing is shared: every delta would be a difference of datasets, so none is shown
      put(app, head, warnings,
        h('div', { class: 'cards' },
          statCard(`A: ${a}`, pct(headline.a.pass_rate), `${plural(headline.a.rollouts, 'rollout')} · failures ${pct(headline.a.failure_rate)}`),
          statCard(`B: ${b}`, pct(headline.b.pass_rate), `${plural(headline.b.rollouts, 'rollout')} · failures ${pct(headline.b.failure_rate)}`)),
        h('div', { class: 'empty-state not-comparable', role: 'status' },
          h('strong', { text: '0 common examples: not comparable.' }), ' ',
          `A has ${plural(result.only_a, 'example')} with rollouts, B has ${fmt(result.only_b)}, and none is in both, so no delta is shown. Compare two runs of the same dataset.`));
      return;
    }
    const heads = h('div', { class: 'cards' },
      statCard(`A: ${a}`, pct(headline.a.pass_rate), `${plural(headline.a.rollouts, 'rollout')} · failures ${pct(headline.a.failure_rate)}`),
      statCard(`B: ${b}`, pct(headline.b.pass_rate), `${plural(headline.b.rollouts, 'rollout')} · failures ${pct(headline.b.failure_rate)}`),
      // over the common examples (result.shared_pass when the runs' example sets differ), as the component deltas
      statCard(result.shared_pass ? 'pass rate Δ (B − A), common examples' : 'pass rate Δ (B − A)',
        signed(((result.shared_pass || { b: headline.b.pass_rate }).b - (result.shared_pass || { a: headline.a.pass_rate }).a) * 100) + ' pp', counts));
    // a component only one run emits has no delta: it is new in B, or gone from it
    const onlyOne = Object.fromEntries(result.components.filter((row) => (row.a === null) !== (row.b === null))
      .map((row) => [row.component, row.a === null ? badge('new', 'info') : badge('only in A', 'warn')]));
    const componentDelta = (name, value) => (onlyOne[name] ? onlyOne[name].cloneNode(true) : deltaCell(value));
    const componentTable = table([
      { label: 'component', render: (row) => row.component },
      { label: 'A mean', num: true, render: (row) => fmt(row.a) },
      { label: 'B mean', num: true, render: (row) => fmt(row.b) },
      { label: 'Δ', num: true, render: (row) => componentDelta(row.component, row.delta) },
    ], result.components);
    const state = { sort: params.sort, desc: params.desc === '1' };
    const rerender = (changes) => { setQuery({ ...params, ...changes }); render(); };
    const names = result.components.map((row) => row.component);
    const exampleTable = table([
      { label: 'example', sort: 'example_id', render: (row) => h('span', {}, h('span', { class: 'id', text: shortId(row), title: row.example_id }), ' ',
        h('a', { href: link.run(a, `example=${enc(row.example_id)}`), text: 'A', class: 'mini' }), ' ',
        h('a', { href: link.run(b, `example=${enc(row.example_id)}`), text: 'B', class: 'mini' })) },
      { label: 'prompt', render: (row) => h('span', { class: 'snippet prompt-snippet', title: row.prompt || null, text: row.prompt || '—' }) },
      { label: 'A reward', num: true, sort: 'a', render: (row) => fmt(row.a) },
      { label: 'B reward', num: true, sort: 'b', render: (row) => fmt(row.b) },
      { label: 'Δ reward', num: true, sort: 'delta', render: (row) => deltaCell(row.delta) },
      { label: 'A pass', num: true, render: (row) => pct(row.a_pass) },
      { label: 'B pass', num: true, render: (row) => pct(row.b_pass) },
      { label: 'Δ pass', num: true, sort: 'pass_delta', render: (row) => deltaCell(row.pass_delta, points) },
      ...(names.length > 1 ? names.map((name) => ({ label: `Δ ${name}`, num: true, render: (row) => componentDelta(name, row.components[name]) })) : []),
    ], result.examples.rows, state, (key) => rerender({ sort: key, desc: state.sort === key && !state.desc ? '1' : state.sort === key ? '0' : '1', offset: '0' }));
    const changed = h('label', { class: 'check' }, h('input', { type: 'checkbox', checked: params.changed === '1', onchange: (event) => rerender({ changed: event.target.checked ? '1' : '', offset: '0' }) }), ' changed examples only');
    // runs of several envs: a component's mean over a whole run would mix envs (``exact`` of a
    // math env and of a code env), so each env is compared with itself, A beside B
    const suite = result.suite || [];
    const perEnv = severalEnvs(suite.map((row) => row.a)) || severalEnvs(suite.map((row) => row.b))
      ? [h('h2', { text: 'Per env' }), h('p', { class: 'muted small', text: 'Each env of either run, A beside B: its pass rate and each component\u2019s mean over that env\u2019s rollouts; — : the run has no rollout of the env, or the env does not emit the component.' }),
        h('div', { class: 'scroll suite-table compare-suite' }, envCompareTable(suite, a, b, deltaCell, points))]
      : [h('h2', { text: 'Per component' }), h('div', { class: 'scroll' }, componentTable)];
    put(app, head, warnings, provenanceNote, heads,
      perEnv,
      h('h2', { text: 'Per example' }), h('div', { class: 'toolbar' }, changed),
      h('div', { class: 'scroll' }, exampleTable),
      pager(result.examples, (offset) => rerender({ offset: String(offset) })));
  }

  // One row per env of either run: A and B side by side, B − A beside them (a blank where a run
  // has no rollout of the env, or its env does not emit the component: never a 0).
  function envCompareTable(suite, a, b, deltaCell, points) {
    const names = componentUnion(suite.flatMap((row) => [row.a, row.b]));
    const both = (row, read) => (row.a && row.b ? read(row.b) - read(row.a) : null);
    const has = (side, name) => Boolean(side && Object.prototype.hasOwnProperty.call(side.components || {}, name));
    const blank = () => h('span', { class: 'muted', text: '—' });
    const envLink = (side, run, env) => (side ? h('a', { href: link.run(run, `tab=rollouts&env=${enc(env)}`), text: side === 'a' ? 'A' : 'B', class: 'mini' }) : null);
    return table([
      { label: 'env', render: (row) => h('span', {}, nameNode(row.env), ' ',
        row.env === null || row.env === undefined ? null : [envLink(row.a && 'a', a, row.env), ' ', envLink(row.b && 'b', b, row.env)]) },
      { label: 'A rollouts', num: true, render: (row) => (row.a ? fmt(row.a.rollouts) : blank()) },
      { label: 'B rollouts', num: true, render: (row) => (row.b ? fmt(row.b.rollouts) : blank()) },
      { label: 'A pass', num: true, render: (row) => (row.a ? pct(row.a.pass_rate) : blank()) },
      { label: 'B pass', num: true, render: (row) => (row.b ? pct(row.b.pass_rate) : blank()) },
      { label: 'Δ pass', num: true, render: (row) => (row.a && row.b ? deltaCell(both(row, (x) => x.pass_rate), points) : blank()) },
      ...names.flatMap((name) => [
        { label: `A ${name}`, num: true, render: (row) => (row.a ? envMean(row.a, name) : blank()) },
        { label: `B ${name}`, num: true, render: (row) => (row.b ? envMean(row.b, name) : blank()) },
        { label: `Δ ${name}`, num: true, render: (row) => (has(row.a, name) && has(row.b, name) ? deltaCell(row.b.components[name] - row.a.components[name]) : blank()) },
      ]),
    ], suite);
  }

  // ---------------------------------------------------------------- run page

  const TABLE_DEFAULTS = {
    rollouts: { sort: 'seq', desc: '0', limit: '50' },
    examples: { sort: 'idx', desc: '0', limit: '50' },
    groups: { sort: 'order', desc: '0', limit: '50' },
  };
  const FILTER_KEYS = ['reason', 'example', 'group', 'c', 'cmin', 'cmax', 'q', 'transcript', 'failed', 'no_signal', 'step', 'env'];
  let poller = null;

  async function runView(r) {
    const run = r.run;
    const state = { tab: 'rollouts', offset: '0', ...r.params };
    crumbs(['runs', link.runs()], [run, null]);
    let overview = await data.overview(run);
    if (!r.params.tab && (overview.meta || {}).kind === 'train') state.tab = 'training';
    const cards = h('div', { class: 'cards' });
    const charts = h('div', { class: 'charts' });
    const tabArea = h('div', { class: 'tab-area' });
    const tabs = h('nav', { class: 'tabs', role: 'tablist' });
    const title = h('section', { class: 'head' });
    const suiteArea = h('section', { class: 'suite', hidden: true });

    function update(changes, reload = true) {
      Object.assign(state, changes);
      setQuery(state);
      if ('env' in changes) drawSuite();
      if (reload) drawTab();
    }

    // A run of several envs: one row per env (rollouts, failures, pass rate, each component's
    // mean over that env's rollouts only), sorted in the page (ssort/sdesc keep it in the URL);
    // an env's name filters the rollouts table to it.
    const SUITE_SORTS = { env: (row) => row.env, rollouts: (row) => row.rollouts, failed: (row) => row.failed, pass_rate: (row) => row.pass_rate };
    function drawSuite() {
      const rows = overview.suite || [];
      suiteArea.hidden = !severalEnvs(rows);
      if (suiteArea.hidden) { clear(suiteArea); return; }
      const names = componentUnion(rows);
      const sort = state.ssort && (SUITE_SORTS[state.ssort] || (state.ssort.startsWith('c:') && names.includes(state.ssort.slice(2)))) ? state.ssort : 'env';
      const desc = state.sdesc === '1';
      const key = SUITE_SORTS[sort] || ((row) => (row.components || {})[sort.slice(2)]);
      const sorted = rows.slice().sort((x, y) => compareValues(key(x), key(y), desc) || compareValues(x.env, y.env, false));
      const onSort = (next) => {
        const before = location.search;
        Object.assign(state, { ssort: next, sdesc: next === sort ? (desc ? '0' : '1') : (next === 'env' ? '0' : '1') });
        setQuery(state);
        // the rollouts table on screen still answers its own parameters, which did not change
        if (tabArea.dataset.drawn === before) tabArea.dataset.drawn = location.search;
        drawSuite();
      };
      const pick = (env) => (event) => {
        event.preventDefault();
        const changes = { tab: 'rollouts', offset: '0' };
        if (state.tab !== 'rollouts') for (const k of [...FILTER_KEYS, 'sort', 'desc']) changes[k] = '';
        changes.env = env;
        update(changes);
      };
      const columns = [
        { label: 'env', sort: 'env', render: (row) => (row.env === null || row.env === undefined ? nameNode(null)
          : h('a', { href: link.run(run, `tab=rollouts&env=${enc(row.env)}`), class: 'env-link', title: `show the rollouts of this env`, onclick: pick(row.env) }, nameNode(row.env))) },
        { label: 'rollouts', sort: 'rollouts', num: true, render: (row) => fmt(row.rollouts) },
        { label: 'failed', sort: 'failed', num: true, render: (row) => h('span', { class: row.failed ? 'warn-text' : null, text: fmt(row.failed) }) },
        { label: 'pass rate', sort: 'pass_rate', num: true, render: (row) => pct(row.pass_rate) },
        ...names.map((name) => ({ label: name, sort: `c:${name}`, num: true, title: `mean of ${name} over the env's rollouts`, render: (row) => envMean(row, name) })),
      ];
      put(suiteArea,
        h('h2', { text: 'Per env' }),
        h('p', { class: 'muted small', text: `${plural(rows.length, 'env')} in this run · each component's mean is over its own env's rollouts (after the zero-fill within that env) · — : the env does not emit it` }),
        h('div', { class: 'scroll suite-table' }, table(columns, sorted, { sort, desc }, onSort, (row) => (state.env && state.env === row.env ? 'current-env' : null))));
    }

    function drawHead() {
      const meta = overview.meta || {};
      const config = meta.config || {};
      put(title, 
        h('h1', {}, run, ' ', statusBadge(overview.state)),
        h('p', { class: 'muted' }, [
          'env ', nameNode(meta.env_class || config.env), ' · model ', nameNode(meta.model || config.model),
          ` · created ${date(meta.created_at)}`,
          overview.rescore ? [' · ', rescoreNote(overview.rescore), overview.rescore.source_created_at ? ` (source created ${date(overview.rescore.source_created_at)})` : ''] : null,
          overview.started_at && overview.ended_at ? ` · wall ${secs(overview.ended_at - overview.started_at)}` : dist && dist.first_started_at && dist.last_ended_at ? ` · wall ${secs(dist.last_ended_at - dist.first_started_at)}` : '',
          meta.error ? h('span', { class: 'bad', text: ` · ${meta.error}` }) : null,
          outageNote(meta.outages),
        ]),
        provenancePanel(meta.provenance, meta.provenance_resumes));
    }

    // what made the run: env code and data (hashed), benchmax, git, model and sampling; a mixture's
    // code, data and git state are its envs' own (one line each, as the CLI's summary prints them)
    function provenancePanel(p, resumes) {
      if (!p || typeof p !== 'object') return null;
      const short = (digest) => (digest ? String(digest).slice(0, 12) : 'none');
      const who = (record) => {
        const env = record.env || {};
        return env.kind === 'package'
          ? `${env.name} ${env.version} (package ${env.distribution}, ${env.entry_point})`
          : String(env.path || env.class || env.spec || '—');
      };
      const gitText = (record) => {
        const git = record.git;
        return git ? `git ${String(git.commit || 'no commit').slice(0, 10)}${git.dirty ? ' (uncommitted changes)' : git.dirty === false ? ' (clean)' : ''}` : 'not in git';
      };
      const codeText = (record) => {
        const code = record.code || {};
        return `${short(code.sha256)} (${fmt(code.files || 0)} files${code.truncated ? ', truncated' : ''}) · ${gitText(record)}`;
      };
      // the digest a person compares: a one-file dataset's is its file's (as the CLI prints it)
      const dataDigest = (record) => {
        const data = record.data || {};
        const files = Array.isArray(data.files) ? data.files : [];
        return files.length === 1 && data.count === 1 ? files[0].sha256 : data.sha256;
      };
      const dataText = (record) => {
        const data = record.data || {};
        const files = Array.isArray(data.files) ? data.files : [];
        const hub = data.origin && data.origin.hub ? `hub ${data.origin.hub}@${data.origin.revision || 'default'} · ` : '';
        return !record.data ? 'not recorded'
          : files.length === 1 && data.count === 1 ? `${hub}${short(files[0].sha256)} ${String(files[0].path || '').split('/').pop()} (${bytes(files[0].size || 0)})`
            : files.length ? `${hub}${short(data.sha256)} (${fmt(data.count)} files, ${bytes(data.bytes || 0)})` : `${hub}${data.source || ''}, no local files`;
      };
      const members = p.members && typeof p.members === 'object' ? Object.entries(p.members) : [];
      const endpoint = Array.isArray(p.endpoint) ? p.endpoint.join(', ') : String(p.endpoint || '—');
      const sampling = Object.entries(p.sampling || {}).map(([key, value]) => `${key}=${typeof value === 'object' ? JSON.stringify(value) : value}`).join(' ') || 'server defaults';
      const rows = members.length
        ? [['env', `mixture of ${members.map(([name]) => name).join(', ')}`],
          ...members.flatMap(([name, member]) => [[`${name}: env`, who(member)], [`${name}: code`, codeText(member)], [`${name}: data`, dataText(member)]])]
        : [['env', who(p)], ['code', codeText(p)], ['data', dataText(p)]];
      rows.push(
        ['model', `${p.model || '—'} at ${endpoint}`],
        ['sampling', sampling],
        ['benchmax', `${p.benchmax || '—'} (python ${p.python || '—'})`],
      );
      if (Array.isArray(p.inherited) && p.inherited.length) rows.push(['from source run', p.inherited.join(', ')]);
      for (const resume of Array.isArray(resumes) ? resumes : []) rows.push([`resumed ${date(resume.at)}`, (resume.changes || []).join('; ')]);
      const list = h('dl', { class: 'provenance' });
      for (const [key, value] of rows) list.append(h('dt', { text: key }), h('dd', { text: value }));
      const summary = members.length
        ? `provenance · ${members.length} envs · ${members.map(([name, member]) => `${name} code ${short((member.code || {}).sha256)}`).join(' · ')}`
        : `provenance · code ${short((p.code || {}).sha256)} · data ${short(dataDigest(p))} · ${gitText(p)}`;
      return h('details', { class: 'card provenance' }, h('summary', { text: summary }), list);
    }

    function outageNote(outages) {
      if (!Array.isArray(outages) || !outages.length) return null;
      const lines = outages.map((o) => `${o.endpoint} down ${date(o.started_at)} for ${o.ended_at ? secs(o.ended_at - o.started_at) : '(not back)'}, ${fmt(o.held)} requests held${o.failed ? ', past --max-outage' : ''}: ${o.cause}`);
      return h('span', { class: outages.some((o) => o.failed) ? 'bad' : '', title: lines.join('\n'), text: ` · ${outages.length} endpoint outage${outages.length > 1 ? 's' : ''}` });
    }

    let dist = null;
    const loadDistributions = async () => {
      try { dist = await data.distributions(run); } catch (error) { dist = { error: String(error.message || error) }; }
      drawHead();
      drawCards();
      drawCharts();
    };

    function drawCards() {
      const o = overview;
      const d = dist && !dist.error ? dist : null;
      const wait = dist && dist.error ? 'unavailable' : '…';
      put(cards, 
        statCard('rollouts', fmt(o.rollouts), `${fmt(o.examples)} examples · ${fmt(o.groups)} groups`),
        statCard('pass rate', pct(o.pass_rate), `reward ≥ ${fmt(o.pass_threshold)}`),
        statCard('failure rate', pct(o.failure_rate), `${fmt(o.failed)} not scored`, o.failed ? () => { update({ tab: 'rollouts', failed: '1', offset: '0' }); } : null),
        statCard('no learning signal', d ? `${fmt(d.groups_no_signal)} / ${fmt(d.groups_with_rollouts)}` : wait, 'groups whose siblings all tie', () => update({ tab: 'groups', no_signal: '1', offset: '0' })),
        statCard('latency', d ? `${secs(d.latency.p50)} p50` : wait, d ? `p95 ${secs(d.latency.p95)} · max ${secs(d.latency.max)}` : 'per rollout'),
        statCard('tokens', d ? `${fmt(d.tokens.completion)} out` : wait, d ? `${fmt(d.tokens.prompt)} in · p50 ${fmt(d.tokens.completion_p50)} / p95 ${fmt(d.tokens.completion_p95)} per rollout` : 'completion and prompt'),
        statCard('turns', d ? fmt(o.rollouts ? d.turns / o.rollouts : 0) : wait, d ? `${fmt(d.tool_calls)} tool calls in all` : 'per rollout'),
        costCard((overview.meta || {}).cost));
    }

    function costCard(cost) {
      if (!cost || !Array.isArray(cost.calls)) return null;
      const roles = {};
      let hits = 0;
      for (const c of cost.calls) {
        const role = roles[c.role] || (roles[c.role] = { usd: 0, requests: 0, unknown: false });
        role.requests += c.requests || 0;
        if (c.usd === null || c.usd === undefined) role.unknown = true; else role.usd += c.usd;
        hits += c.cache_hits || 0;
      }
      const parts = Object.keys(roles).sort().map((name) => `${name} ${roles[name].unknown ? 'unknown' : usd(roles[name].usd)} · ${calls(roles[name].requests)}`);
      if (hits) parts.push(`${fmt(hits)} from the cache`);
      const unpriced = (cost.unpriced || []).length ? `no price for ${cost.unpriced.join(', ')}` : '';
      return statCard('cost', usd(cost.usd), [unpriced, ...parts].filter(Boolean).join(' · '));
    }

    function drawCharts() {
      clear(charts);
      const filled = dist && dist.filled ? dist.filled : {};
      for (const [name, comp] of Object.entries(overview.components)) {
        charts.append(histogram(`${name} · mean ${fmt(comp.mean)} ± ${fmt(comp.std)}${filled[name] ? ` · ${fmt(filled[name])} zero-filled` : ''}`, comp.histogram, {
          onPick: (bar) => update({ tab: 'rollouts', c: name, cmin: String(bar.low), cmax: String(bar.high), offset: '0' }),
        }));
      }
      if (Object.keys(overview.components).length > 1) charts.append(histogram('total reward', overview.reward_histogram));
      const reasons = h('figure', { class: 'card chart' }, h('figcaption', { text: 'termination reasons' }));
      const most = Math.max(1, ...overview.reasons.map((x) => x.count));
      for (const item of overview.reasons) {
        reasons.append(h('button', { type: 'button', class: 'reason-row', title: 'show these rollouts', onclick: () => update({ tab: 'rollouts', reason: item.reason, offset: '0' }) },
          h('span', { class: 'reason-name' }, reasonBadge(item.reason, item.scorable)),
          h('span', { class: 'reason-bar' }, h('span', { class: 'fill', dataset: { w: String(Math.round((100 * item.count) / most)) } })),
          h('span', { class: 'num', text: `${fmt(item.count)} (${pct(item.count / overview.rollouts)})` })));
      }
      for (const fill of reasons.querySelectorAll('.fill')) fill.style.width = `${fill.dataset.w}%`;
      charts.append(reasons);
      if (dist && !dist.error) {
        charts.append(histogram('latency per rollout (s)', dist.latency.histogram, { unit: ' s' }));
        charts.append(histogram('completion tokens per rollout', dist.tokens.histogram));
      } else {
        charts.append(h('figure', { class: 'card chart' }, h('figcaption', { text: 'latency and tokens' }), h('p', { class: 'muted', text: dist ? `unavailable: ${dist.error}` : 'computing…' })));
      }
    }

    function drawTabs() {
      clear(tabs);
      const training = (overview.meta || {}).kind === 'train' ? [['training', 'Training']] : [];
      for (const [key, label] of [...training, ['rollouts', 'Rollouts'], ['examples', 'Examples'], ['groups', 'Groups'], ['config', 'Config']]) {
        tabs.append(h('button', { type: 'button', role: 'tab', 'aria-selected': state.tab === key ? 'true' : 'false', class: state.tab === key ? 'active' : null, text: label,
          onclick: () => { const keep = { tab: key, offset: '0' }; for (const k of [...FILTER_KEYS, 'sort', 'desc']) keep[k] = ''; update(keep); drawTabs(); } }));
      }
    }

    // tabArea.dataset.drawn is the query string the table on screen answers (set once it is
    // drawn): a page, or a test, knows the table matches the URL when the two are equal.
    async function drawTab() {
      drawTabs();
      const token = Symbol('draw');
      const query = location.search;
      drawTab.current = token;
      tabArea.setAttribute('aria-busy', 'true');
      let node;
      try {
        node = await { training: trainingTab, rollouts: rolloutsTab, examples: examplesTab, groups: groupsTab, config: configTab }[state.tab]?.() || h('p', { text: 'unknown tab' });
      } catch (error) {
        node = failure(error);
      }
      if (drawTab.current !== token) return;  // a later draw owns the table
      put(tabArea, node);
      tabArea.dataset.drawn = query;
      tabArea.setAttribute('aria-busy', 'false');
    }

    function sorter(defaults) {
      return (key) => {
        const current = state.sort || defaults.sort;
        const desc = current === key ? (state.desc === '1' ? '0' : '1') : (['reward', 'seconds', 'completion_tokens', 'pass_rate', 'mean', 'std', 'failed'].includes(key) || key.startsWith('c:') ? '1' : '0');
        update({ sort: key, desc, offset: '0' });
      };
    }

    // A run of several envs: which env's rows a table keeps (an env asked for in the URL is always
    // offered, so a link to an env the run lacks reads as such); none in a run of one env.
    function envFilter() {
      const envs = (overview.suite || []).filter((x) => x.env !== null && x.env !== undefined);
      if (!severalEnvs(overview.suite) && !state.env) return null;
      const options = envs.map((x) => ({ value: String(x.env), text: `${x.env} (${plural(x.rollouts, 'rollout')})` }));
      if (state.env && !options.some((x) => x.value === state.env)) options.push({ value: state.env, text: `${state.env} (none)` });
      return h('select', { name: 'env', 'aria-label': 'env', onchange: (e) => update({ env: e.target.value, offset: '0' }) },
        h('option', { value: '', text: 'any env' }), options.map((x) => h('option', { value: x.value, text: x.text, selected: state.env === x.value })));
    }

    // the env of each row, sortable, in a run of several envs only (a run of one env reads as it always has)
    const envColumn = (several) => (several ? [{ label: 'env', sort: 'env', render: (row) => nameNode(row.env) }] : []);

    function tableParams(kind, keys) {
      const defaults = TABLE_DEFAULTS[kind];
      const params = { sort: state.sort || defaults.sort, desc: state.desc || defaults.desc, offset: state.offset || '0', limit: state.limit || defaults.limit };
      for (const key of keys) if (state[key]) params[key] = state[key];
      return params;
    }

    async function rolloutsTab() {
      const params = tableParams('rollouts', ['reason', 'example', 'group', 'c', 'cmin', 'cmax', 'q', 'transcript', 'failed', 'step', 'env']);
      const page = await data.rollouts(run, params);
      const names = Object.keys(overview.components);
      const filters = h('form', { class: 'filters', onsubmit: (event) => event.preventDefault() });
      const several = severalEnvs(overview.suite);
      const envSelect = envFilter();
      const reasonSelect = h('select', { name: 'reason', 'aria-label': 'termination reason', onchange: (e) => update({ reason: e.target.value, offset: '0' }) },
        h('option', { value: '', text: 'any reason' }), overview.reasons.map((x) => h('option', { value: x.reason, text: `${x.reason} (${fmt(x.count)})`, selected: state.reason === x.reason })));
      const failedSelect = h('select', { name: 'failed', 'aria-label': 'scored or failed', onchange: (e) => update({ failed: e.target.value, offset: '0' }) },
        h('option', { value: '', text: 'scored and failed' }), h('option', { value: '0', text: 'scored only', selected: state.failed === '0' }), h('option', { value: '1', text: 'failed only', selected: state.failed === '1' }));
      const compSelect = h('select', { name: 'c', 'aria-label': 'component', onchange: (e) => update({ c: e.target.value, offset: '0' }) },
        h('option', { value: '', text: 'any component' }), names.map((name) => h('option', { value: name, text: name, selected: state.c === name })));
      const numberInput = (key, placeholder) => h('input', { type: 'number', step: 'any', name: key, placeholder, value: state[key] || '', class: 'short', 'aria-label': placeholder, onchange: (e) => update({ [key]: e.target.value, offset: '0' }) });
      let timer = null;
      const search = h('input', { type: 'search', name: 'q', placeholder: 'search text…', value: state.q || '', 'aria-label': 'search', oninput: (e) => { clearTimeout(timer); timer = setTimeout(() => update({ q: e.target.value, offset: '0' }), 300); } });
      const example = h('input', { type: 'text', name: 'example', placeholder: 'example id', value: state.example || '', 'aria-label': 'example id', onchange: (e) => update({ example: e.target.value.trim(), offset: '0' }) });
      const inTranscript = h('label', { class: 'check', title: 'also search every message (slower on big runs)' }, h('input', { type: 'checkbox', name: 'transcript', checked: state.transcript === '1', disabled: STATIC, onchange: (e) => update({ transcript: e.target.checked ? '1' : '', offset: '0' }) }), ' whole transcript');
      const reset = h('button', { type: 'button', text: 'clear filters', onclick: () => { const blank = { offset: '0' }; for (const key of FILTER_KEYS) blank[key] = ''; update(blank); } });
      const stepInput = h('input', { type: 'number', min: '0', step: '1', name: 'step', placeholder: 'step', value: state.step || '', class: 'short', 'aria-label': 'training step', onchange: (e) => update({ step: e.target.value, offset: '0' }) });
      if (envSelect) filters.append(envSelect);
      filters.append(reasonSelect, failedSelect, compSelect, numberInput('cmin', 'min'), numberInput('cmax', 'max'), example, stepInput, search, inTranscript, reset);
      const tstate = { sort: params.sort, desc: params.desc === '1' };
      const columns = [
        { label: '#', num: true, sort: 'seq', render: (row) => fmt(row.seq) },
        { label: 'rollout', sort: 'rollout_id', render: (row) => h('a', { href: link.rollout(run, row.rollout_id), text: shortened(row.rollout_id, row), title: row.rollout_id, class: 'id' }) },
        ...envColumn(several),
        { label: 'group', sort: 'group_id', render: (row) => h('a', { href: link.group(run, row.group_id), text: `group · ${row.sample_index}`, class: 'mini', title: row.group_id }) },
        { label: 'reason', sort: 'termination_reason', render: (row) => reasonBadge(row.termination_reason, row.scored) },
        { label: 'reward', num: true, sort: 'reward', render: (row) => fmt(row.reward) },
        ...names.map((name) => ({ label: name, num: true, sort: `c:${name}`, render: (row) => componentCell(row.rewards[name]) })),
        { label: 'turns', num: true, sort: 'num_turns', render: (row) => fmt(row.num_turns) },
        { label: 'tools', num: true, sort: 'num_tool_calls', render: (row) => fmt(row.num_tool_calls) },
        { label: 'tokens out', num: true, sort: 'completion_tokens', render: (row) => fmt(row.completion_tokens) },
        { label: 'seconds', num: true, sort: 'seconds', render: (row) => secs(row.seconds) },
        { label: 'prompt', render: (row) => h('span', { class: 'snippet prompt-snippet', title: row.prompt || null, text: row.prompt || '—' }) },
        { label: 'final answer / error', sort: 'final_text', render: (row) => h('span', { class: 'snippet', title: row.error || null, text: row.error ? `⚠ ${row.error}` : row.final_text }) },
      ];
      const limitSelect = h('select', { 'aria-label': 'rows per page', onchange: (e) => update({ limit: e.target.value, offset: '0' }) },
        ['25', '50', '100', '200'].map((n) => h('option', { value: n, text: `${n} / page`, selected: params.limit === n })));
      return h('div', {}, filters,
        h('div', { class: 'scroll' }, table(columns, page.rows, tstate, sorter(TABLE_DEFAULTS.rollouts), (row) => (row.scored ? null : 'failed-row'))),
        h('div', { class: 'table-foot' }, pager(page, (offset) => update({ offset: String(offset) })), limitSelect));
    }

    async function trainingTab() {
      // a training run's steps: rewards per component, dead groups, IS ratio, KL; each step links to its rollouts
      const body = await data.steps(run);
      // a step is numbered as the terminal and metrics.jsonl number it: the trainer's update count
      // (1..N); the rollouts it trained on are stored under the generation step before it (0..N-1)
      const steps = (body.steps || []).map((row) => ({ ...row, shown: typeof row.metrics.trainer_step === 'number' ? row.metrics.trainer_step : row.step + 1 }));
      if (!steps.length) return h('p', { class: 'muted', text: 'No training step recorded yet.' });
      const names = Object.keys(overview.components);
      const value = (row, key) => (typeof row.metrics[key] === 'number' ? row.metrics[key] : null);
      // the env's per-turn rewards (env_response), mean per turn of the rollouts each step generated
      const turnNames = [...new Set(steps.flatMap((row) => Object.keys(row.metrics).filter((key) => key.startsWith('turn_rewards/'))))].sort();
      const series = [
        ...names.map((name) => ({ label: name, key: `generated/${name}` })),
        ...turnNames.map((key) => ({ label: `turn reward · ${key.slice('turn_rewards/'.length)}`, key })),
        ...(turnNames.length ? [{ label: 'turns per rollout', key: 'turns/mean' }] : []),
        { label: 'dead-group share', key: 'groups/dead_share' },
      ];
      // a mixture's steps hold each env's figures under "envs": its reward curve and its dead groups apart
      const envNames = [...new Set(steps.flatMap((row) => Object.keys(row.metrics.envs || {})))].sort();
      const envFigure = (row, env, key) => {
        const figures = (row.metrics.envs || {})[env];
        return figures && typeof figures[key] === 'number' ? figures[key] : null;
      };
      const envCharts = envNames.flatMap((env) => [
        lineChart(`reward · ${env}`, steps.map((row) => [row.shown, envFigure(row, env, 'reward')])),
        lineChart(`dead groups · ${env}`, steps.map((row) => [row.shown, envFigure(row, env, 'groups_dead')])),
      ]);
      // a curriculum's figures per step: examples set aside, the difficulty level, a mixture's env weights
      // (the run's under curriculum/<figure>, each env's under curriculum/<env>/<figure>)
      const CURRICULUM = { set_aside: 'set aside', level: 'level', weight: 'weight' };
      const curriculumKeys = [...new Set(steps.flatMap((row) => Object.keys(row.metrics).filter((key) => {
        const match = /^curriculum\/(?:(.+)\/)?([a-z_]+)$/.exec(key);
        return match !== null && match[2] in CURRICULUM;
      })))].sort();
      const curriculumLabel = (key) => {
        const match = /^curriculum\/(?:(.+)\/)?([a-z_]+)$/.exec(key);
        return match[1] ? `${CURRICULUM[match[2]]} · ${match[1]}` : CURRICULUM[match[2]];
      };
      const curriculumCharts = curriculumKeys.map((key) => lineChart(`curriculum: ${curriculumLabel(key)}`, steps.map((row) => [row.shown, value(row, key)])));
      const curriculumColumns = curriculumKeys.map((key) => ({ label: curriculumLabel(key), num: true, title: `the curriculum's ${curriculumLabel(key)} after the step was generated`,
        render: (row) => (value(row, key) === null ? '—' : (key.endsWith('/weight') ? fmt(value(row, key)) : String(value(row, key)))) }));
      const charts = h('div', { class: 'charts' }, [...series.map((item) => lineChart(item.label, steps.map((row) => [row.shown, value(row, item.key)]))), ...envCharts, ...curriculumCharts]);
      const envColumns = envNames.flatMap((env) => [
        { label: `${env} reward`, num: true, title: `mean reward of the rollouts the step generated for ${env}`, render: (row) => fmt(envFigure(row, env, 'reward')) },
        { label: `${env} dead`, num: true, title: `${env}'s groups with no signal / its groups drawn`,
          render: (row) => (envFigure(row, env, 'groups_drawn') === null ? '—' : `${fmt(envFigure(row, env, 'groups_dead'))} / ${fmt(envFigure(row, env, 'groups_drawn'))}`) },
      ]);
      const ratio = (row) => (value(row, 'is_ratio/mean') === null ? '—' : `${fmt(value(row, 'is_ratio/mean'))} (${fmt(value(row, 'is_ratio/min'))}–${fmt(value(row, 'is_ratio/max'))})`);
      const kl = (row) => (value(row, 'kl') !== null ? value(row, 'kl') : value(row, 'kl/sampler'));
      const columns = [
        { label: 'step', num: true, render: (row) => h('a', { href: `?tab=rollouts&step=${row.step}`, text: fmt(row.shown), title: `the rollouts this step trained on (generation step ${row.step})`,
          onclick: (event) => { event.preventDefault(); update({ tab: 'rollouts', step: String(row.step), offset: '0' }); } }) },
        { label: 'reward (trained)', num: true, render: (row) => fmt(value(row, 'reward')) },
        ...names.map((name) => ({ label: name, num: true, title: 'mean over every rollout the step generated', render: (row) => fmt(value(row, `generated/${name}`)) })),
        { label: 'dead groups', num: true, render: (row) => (value(row, 'groups/drawn') === null ? '—' : `${fmt(value(row, 'groups/dead'))} / ${fmt(value(row, 'groups/drawn'))}`) },
        ...envColumns,
        ...curriculumColumns,
        { label: 'IS ratio', num: true, render: ratio },
        { label: 'KL', num: true, title: 'KL to the reference (beta > 0), else KL(sampler || policy)', render: (row) => (kl(row) === null ? '—' : kl(row).toExponential(2)) },
        { label: 'stale', num: true, title: 'most steps a rollout\u2019s policy lagged the trainer', render: (row) => fmt(value(row, 'policy/staleness_max')) },
        { label: 'seconds', num: true, render: (row) => secs(value(row, 'step_time')) },
        { label: 'token check', render: (row) => ((row.metrics.mismatched_rollouts || []).length
          ? badge(`${row.metrics.mismatched_rollouts.length} mismatched`, 'bad') : h('span', { class: 'muted', text: 'ok' })) },
      ];
      return h('div', {}, charts, h('div', { class: 'scroll' }, table(columns, steps, null, null)));
    }

    async function examplesTab() {
      const params = tableParams('examples', ['q', 'env']);
      const page = await data.examples(run, params);
      const envSelect = envFilter();
      let timer = null;
      const search = h('input', { type: 'search', placeholder: 'example id…', value: state.q || '', 'aria-label': 'search examples', oninput: (e) => { clearTimeout(timer); timer = setTimeout(() => update({ q: e.target.value, offset: '0' }), 300); } });
      const columns = [
        { label: '#', num: true, sort: 'idx', render: (row) => fmt(row.idx) },
        { label: 'example', sort: 'example_id', render: (row) => h('a', { href: link.run(run, `example=${enc(row.example_id)}`), text: shortId(row), title: row.example_id, class: 'id', onclick: STATIC ? null : (event) => { event.preventDefault(); update({ tab: 'rollouts', example: row.example_id, offset: '0', sort: '', desc: '', q: '' }); } }) },
        ...envColumn(severalEnvs(overview.suite)),
        { label: 'prompt', render: (row) => h('span', { class: 'snippet', title: row.prompt || null, text: row.prompt || '—' }) },
        { label: 'rollouts', num: true, sort: 'rollouts', render: (row) => fmt(row.rollouts) },
        { label: 'passed', num: true, sort: 'passed', render: (row) => fmt(row.passed) },
        { label: 'pass rate', num: true, sort: 'pass_rate', render: (row) => h('span', { class: 'rate' }, h('span', { class: 'meter' }, h('span', { class: 'fill', dataset: { w: String(Math.round(100 * row.pass_rate)) } })), pct(row.pass_rate)) },
        { label: 'mean reward', num: true, sort: 'mean_reward', render: (row) => fmt(row.mean_reward) },
        { label: 'failed', num: true, render: (row) => fmt(row.failed) },
        { label: 'groups', num: true, sort: 'groups', render: (row) => fmt(row.groups) },
      ];
      const node = h('div', {}, h('div', { class: 'filters' }, envSelect, search),
        h('div', { class: 'scroll' }, table(columns, page.rows, { sort: params.sort, desc: params.desc === '1' }, sorter(TABLE_DEFAULTS.examples))),
        pager(page, (offset) => update({ offset: String(offset) })));
      for (const fill of node.querySelectorAll('.fill')) fill.style.width = `${fill.dataset.w}%`;
      return node;
    }

    async function groupsTab() {
      const params = tableParams('groups', ['no_signal', 'example', 'env']);
      const page = await data.groups(run, params);
      const envSelect = envFilter();
      const noSignal = h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'no_signal', checked: state.no_signal === '1', onchange: (e) => update({ no_signal: e.target.checked ? '1' : '', offset: '0' }) }), ' only groups with no learning signal (all siblings tie)');
      const columns = [
        { label: 'group', sort: 'group_id', render: (row) => h('a', { href: link.group(run, row.group_id), text: shortened(row.group_id, row), title: row.group_id, class: 'id' }) },
        { label: 'example', sort: 'order', render: (row) => h('span', { class: 'id', text: shortId(row), title: row.example_id }) },
        ...envColumn(severalEnvs(overview.suite)),
        { label: 'prompt', render: (row) => h('span', { class: 'snippet prompt-snippet', title: row.prompt || null, text: row.prompt || '—' }) },
        { label: 'size', num: true, sort: 'size', render: (row) => fmt(row.size) },
        { label: 'mean', num: true, sort: 'mean', render: (row) => fmt(row.mean) },
        { label: 'std', num: true, sort: 'std', render: (row) => fmt(row.std) },
        { label: 'min', num: true, sort: 'low', render: (row) => fmt(row.low) },
        { label: 'max', num: true, sort: 'high', render: (row) => fmt(row.high) },
        { label: 'failed', num: true, sort: 'failed', render: (row) => fmt(row.failed) },
        { label: 'signal', render: (row) => (row.no_signal ? badge('no signal', 'warn') : badge('ok', 'ok')) },
      ];
      return h('div', {}, h('div', { class: 'filters' }, envSelect, noSignal),
        h('div', { class: 'scroll' }, table(columns, page.rows, { sort: params.sort, desc: params.desc === '1' }, sorter(TABLE_DEFAULTS.groups))),
        pager(page, (offset) => update({ offset: String(offset) })));
    }

    function configTab() {
      return h('div', { class: 'card' }, h('h3', { text: 'Run metadata (secrets redacted)' }), longText(JSON.stringify(overview.meta, null, 2), 20000, 400));
    }

    put(app, title, cards, charts, suiteArea, tabs, tabArea);
    drawHead();
    drawCards();
    drawCharts();
    drawSuite();
    const distributions = loadDistributions();
    await drawTab();
    await distributions;

    if (!STATIC) {
      const stampOf = (progress) => `${progress.rollouts}/${progress.filled}/${progress.status}`;
      let seen = overview.progress ? stampOf(overview.progress) : null;
      const live = document.getElementById('live');
      live.hidden = (overview.state || {}).status !== 'running';
      live.textContent = `● live · ${fmt(overview.rollouts)} rollouts`;
      clearInterval(poller);
      poller = setInterval(async () => {
        if (document.hidden) return;
        try {
          const progress = await data.progress(run);
          const stamp = stampOf(progress);
          live.hidden = progress.status !== 'running';
          live.textContent = `● live · ${fmt(progress.rollouts)} rollouts`;
          if (seen !== null && stamp !== seen) {
            overview = await data.overview(run);
            drawHead();
            drawCards();
            drawCharts();
            drawSuite();
            if (state.tab !== 'config') await drawTab();
            await loadDistributions();
          }
          seen = stamp;
        } catch (_) { /* the next poll retries */ }
      }, 2000);
    }
  }

  // ---------------------------------------------------------------- logs

  function logRecord(log, startedAt) {
    const offset = startedAt ? `+${(log.time - startedAt).toFixed(3)}s` : '';
    const levelno = log.levelno || LEVELS[log.level] || 0;
    return h('div', { class: `log lvl-${String(levelno)}`, dataset: { levelno: String(levelno), logger: log.logger } },
      h('div', { class: 'log-head' },
        h('span', { class: 'lvl', text: log.level }),
        h('span', { class: 'muted', text: offset }),
        h('span', { class: 'logger', text: log.logger }),
        log.file ? h('span', { class: 'where', text: log.line ? `${log.file}:${log.line}` : log.file }) : null,  // an agent's stderr has no line
        // a group hook's records belong to no rollout, so to no turn: only their phase is shown
        h('span', { class: 'muted', text: log.rollout_id ? `turn ${log.turn} · ${log.phase}` : log.phase })),
      longText(log.message, 2000, 30),
      log.traceback ? h('details', { class: 'tb' }, h('summary', { text: 'traceback' }), h('pre', { class: 'text', text: log.traceback })) : null);
  }

  function logBlock(logs, label, startedAt) {
    if (!logs || !logs.length) return null;
    return h('div', { class: 'logs' }, h('div', { class: 'logs-label', text: `${label} · ${plural(logs.length, 'log record')}` }), logs.map((log) => logRecord(log, startedAt)));
  }

  function logControls(root) {
    const level = h('select', { 'aria-label': 'minimum log level' }, ['DEBUG', 'INFO', 'WARNING', 'ERROR'].map((name) => h('option', { value: String(LEVELS[name]), text: `${name} and up` })));
    const logger = h('input', { type: 'search', placeholder: 'logger…', 'aria-label': 'logger filter' });
    const apply = () => {
      const min = Number(level.value);
      const want = logger.value.trim().toLowerCase();
      for (const el of root.querySelectorAll('.log')) {
        el.hidden = Number(el.dataset.levelno) < min || (want && !el.dataset.logger.toLowerCase().includes(want));
      }
      for (const block of root.querySelectorAll('.logs')) {
        block.hidden = ![...block.querySelectorAll('.log')].some((el) => !el.hidden);
      }
    };
    level.addEventListener('change', apply);
    logger.addEventListener('input', apply);
    return h('div', { class: 'log-controls' }, h('span', { class: 'muted', text: 'logs:' }), level, logger);
  }

  // ---------------------------------------------------------------- messages

  function contentNode(content, { json = false } = {}) {
    if (content === null || content === undefined || content === '') return null;
    if (typeof content === 'string') {
      const pretty = json ? jsonOrText(content) : null;
      return pretty === null ? longText(content) : longText(pretty, 3000, 60);
    }
    if (Array.isArray(content)) {
      return h('div', { class: 'parts' }, content.map((part) => {
        if (part && part.type === 'text') return contentNode(String(part.text ?? ''), { json });
        if (part && part.type === 'image_url') return imageNode(part);
        if (typeof part === 'string') return longText(part);
        return longText(JSON.stringify(part, elideLong, 2));
      }));
    }
    return longText(JSON.stringify(content, elideLong, 2));
  }

  function toolCallNode(call) {
    const fn = call.function || {};
    const args = prettyJson(fn.arguments === undefined ? '' : fn.arguments);
    return h('div', { class: 'tool-call' },
      h('div', { class: 'tool-head' }, h('span', { class: 'tool-icon', text: '⚙' }), h('span', { class: 'tool-name', text: fn.name || '(no name)' }), h('span', { class: 'muted', text: call.id || '' }),
        args.valid ? null : badge('arguments are not valid JSON', 'bad')),
      longText(args.text, 3000, 60));
  }

  // calls: what the transcript knows of its tool calls: errors, the ids of the calls whose result
  // told the model of an error (the turn records' tool_errors, as the store reads them), painted
  // as errors; names, each call's tool name by id (a tool message need not repeat it).
  function messageNode(message, calls = {}) {
    const role = String(message.role || 'unknown');
    const callId = String(message.tool_call_id ?? '');
    const failed = role === 'tool' && calls.errors instanceof Set && calls.errors.has(callId);
    const toolName = message.name || (calls.names instanceof Map ? calls.names.get(callId) : '') || '';
    const el = h('div', { class: `msg${failed ? ' tool-error' : ''}`, dataset: { role } });
    const head = h('div', { class: 'msg-head' }, h('span', { class: 'role', text: role }));
    if (role === 'tool') {
      head.append(h('span', { class: 'tool-name', text: toolName }), h('span', { class: 'muted', text: message.tool_call_id || '' }));
      head.append(failed ? badge('tool error', 'bad') : badge('result', 'ok'));
    }
    el.append(head);
    if (message.reasoning_content) el.append(h('details', { class: 'reasoning' }, h('summary', { text: 'reasoning' }), longText(message.reasoning_content)));
    const body = contentNode(message.content, { json: role === 'tool' });
    if (body) el.append(body);
    else if (!message.tool_calls) el.append(h('p', { class: 'muted', text: '(empty)' }));
    for (const call of message.tool_calls || []) el.append(toolCallNode(call));
    return el;
  }

  // Lays the transcript out turn by turn and puts each log record where it was emitted.
  function transcript(record) {
    const messages = record.messages || [];
    const turns = record.turns || [];
    const assistantAt = messages.map((m, i) => (m.role === 'assistant' ? i : -1)).filter((i) => i >= 0);
    const turnCount = Math.min(turns.length, assistantAt.length);
    const turnStart = assistantAt.slice(assistantAt.length - turnCount);
    const promptEnd = turnCount ? turnStart[0] : messages.length;
    const firstStart = turns.length ? turns[0].started_at : null;
    const slots = new Map();
    const put = (key, log) => { if (!slots.has(key)) slots.set(key, []); slots.get(key).push(log); };
    for (const log of record.logs || []) {
      if ((log.phase === 'model' || log.phase === 'tools' || log.phase === 'env') && log.turn < turnCount) put(`${log.phase}:${log.turn}`, log);
      else if (log.phase === 'context' && (firstStart === null || log.time < firstStart)) put('before', log);
      else if (log.phase === 'reward' || log.phase === 'group_reward') put('reward', log);
      else put('after', log);
    }
    const start = record.started_at;
    const names = new Map();
    for (const message of messages) {
      for (const call of message.tool_calls || []) {
        if (call && call.id !== undefined && call.function && typeof call.function.name === 'string') names.set(String(call.id), call.function.name);
      }
    }
    const toolErrors = { errors: new Set((record.tool_errors || []).map(String)), names };
    const root = h('div', { class: 'transcript' });
    const prompt = messages.slice(0, promptEnd);
    if (prompt.length) {
      const size = prompt.reduce((n, m) => n + (typeof m.content === 'string' ? m.content.length : 0), 0);
      const block = h('details', { class: 'prompt', open: size < 3000 },
        h('summary', { text: `prompt · ${plural(prompt.length, 'message')}` }), prompt.map((m) => messageNode(m, toolErrors)));
      add(root, block);
    }
    add(root, logBlock(slots.get('before'), 'while setting up (rollout_context)', start));
    for (let k = 0; k < turnCount; k++) {
      const turn = turns[k] || {};
      const usage = turn.usage || {};
      add(root, h('div', { class: 'turn-head', id: `turn-${k}` },
        h('strong', { text: `turn ${k}` }),
        h('span', { text: `model ${secs(turn.model_seconds)}` }),
        turn.tool_seconds ? h('span', { text: `tools ${secs(turn.tool_seconds)}` }) : null,
        h('span', { text: `${fmt(usage.prompt_tokens || 0)} → ${fmt(usage.completion_tokens || 0)} tokens` }),
        turn.finish_reason ? h('span', { class: 'muted', text: `finish: ${turn.finish_reason}` }) : null));
      add(root, logBlock(slots.get(`model:${k}`), `during the model call of turn ${k}`, start));
      add(root, messageNode(messages[turnStart[k]], toolErrors));
      const end = k + 1 < turnCount ? turnStart[k + 1] : messages.length;
      // the env's observation (env_response) is the turn's last env_messages messages, after its tool results
      const envFrom = Math.max(turnStart[k] + 1, end - (Number(turn.env_messages) || 0));
      for (let i = turnStart[k] + 1; i < envFrom; i++) add(root, messageNode(messages[i], toolErrors));
      add(root, logBlock(slots.get(`tools:${k}`), `during the tool calls of turn ${k}`, start));
      add(root, envTurnNode(turn, k));
      for (let i = envFrom; i < end; i++) {
        const node = messageNode(messages[i], toolErrors);
        node.classList.add('env-observation');
        node.querySelector('.msg-head').append(badge('env', 'info'));
        add(root, node);
      }
      add(root, logBlock(slots.get(`env:${k}`), `during the env's answer to turn ${k}`, start));
    }
    add(root, logBlock(slots.get('after'), 'after the last turn', start));
    add(root, logBlock(slots.get('reward'), 'while scoring', start));
    return root;
  }

  function turnRewardText(rewards) {
    const names = Object.keys(rewards || {});
    return names.length ? names.map((name) => `${name} ${fmt(rewards[name])}`).join(' · ') : '';
  }

  // What the env said about a turn (env_response): its reward and verdict; null for a turn it did not answer.
  function envTurnNode(turn, k) {
    const rewards = turnRewardText(turn.rewards);
    if (!rewards && !turn.env_info && !turn.env_messages) return null;
    return h('div', { class: 'env-turn', dataset: { turn: String(k) } },
      h('strong', { text: `env · turn ${k}` }),
      turn.env_seconds ? h('span', { class: 'muted', text: secs(turn.env_seconds) }) : null,
      rewards ? h('span', { class: 'turn-reward', text: `turn reward: ${rewards}` }) : null,
      turn.env_info ? h('span', { class: 'env-info', text: turn.env_info }) : null);
  }

  function tokenView(turns) {
    const withTokens = turns.filter((turn) => turn.completion_token_ids && turn.completion_token_ids.length);
    if (!withTokens.length) return null;
    const root = h('section', { class: 'card' }, h('h3', { text: 'Tokens' }), h('p', { class: 'muted', text: 'Completion token ids per turn, shaded by probability (darker = less likely); hover for the logprob.' }));
    for (const turn of withTokens) {
      const ids = turn.completion_token_ids;
      const logprobs = turn.completion_logprobs || [];
      const row = h('div', { class: 'tokens' });
      const draw = (count) => {
        clear(row);
        for (let i = 0; i < Math.min(count, ids.length); i++) {
          const lp = logprobs[i];
          const p = typeof lp === 'number' ? Math.exp(lp) : null;
          const chip = h('span', { class: 'tok', title: p === null ? `id ${ids[i]}` : `id ${ids[i]} · logprob ${lp.toFixed(4)} · p ${p.toFixed(3)}`, text: String(ids[i]) });
          if (p !== null) chip.style.backgroundColor = `rgba(220, 80, 60, ${(1 - p) * 0.85})`;
          row.append(chip);
        }
        if (ids.length > count) row.append(h('button', { type: 'button', class: 'more', text: `show all ${fmt(ids.length)}`, onclick: () => draw(ids.length) }));
      };
      draw(400);
      add(root, h('div', { class: 'muted', text: `turn ${turn.index} · ${fmt(ids.length)} tokens${turn.prompt_token_ids ? ` · prompt ${fmt(turn.prompt_token_ids.length)} tokens` : ''}` }), row);
    }
    return root;
  }

  function copyText(text, button) {
    const done = () => { const old = button.textContent; button.textContent = 'copied ✓'; setTimeout(() => { button.textContent = old; }, 1500); };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, () => fallbackCopy(text, done));
    } else fallbackCopy(text, done);
  }

  function fallbackCopy(text, done) {
    const area = h('textarea', { class: 'offscreen' });
    area.value = text;
    document.body.append(area);
    area.select();
    try { document.execCommand('copy'); done(); } finally { area.remove(); }
  }

  // The payload fields beyond the prompt (what rollout.example_args gives the reward: the
  // expected answer...), one row each; values are text, structured ones pretty-printed.
  function fieldsTable(fields) {
    const names = Object.keys(fields || {});
    if (!names.length) return h('p', { class: 'muted', text: 'no fields beyond the prompt' });
    return h('table', { class: 'fields' }, h('tbody', {}, names.map((name) => {
      const value = fields[name];
      const shown = typeof value === 'string' ? longText(value, 600, 12) : longText(JSON.stringify(value, elideLong, 2), 1500, 30);
      return h('tr', {}, h('th', { scope: 'row', text: name }), h('td', {}, shown));
    })));
  }

  // ---------------------------------------------------------------- group view

  // The env of a group's or a rollout's example, linked to the run's rollouts of that env; only
  // in a run of several envs (groups never mix envs, so a group's siblings share their env).
  function envLine(run, record) {
    if (!record.several_envs) return null;
    const siblings = Array.isArray(record.siblings) ? record.siblings : [];
    const env = record.env ?? (siblings.length ? siblings[0].env : null);
    if (env === null || env === undefined) return null;
    return h('span', { class: 'env-line' }, 'env ', h('a', { href: link.run(run, `tab=rollouts&env=${enc(env)}`), class: 'env-link', title: 'the run\u2019s rollouts of this env' }, nameNode(env)), ' · ');
  }

  async function groupView(r) {
    const group = await data.group(r.run, r.id);
    crumbs(['runs', link.runs()], [r.run, link.run(r.run)], [`group ${shortened(group.group_id, group)}`, null]);
    const names = Object.keys(group.components);
    const nav = h('div', { class: 'navrow' },
      group.prev ? h('a', { href: link.group(r.run, group.prev), class: 'button', text: '‹ previous group', rel: 'prev' }) : h('span', { class: 'button disabled', text: '‹ previous group' }),
      group.next ? h('a', { href: link.group(r.run, group.next), class: 'button', text: 'next group ›', rel: 'next' }) : h('span', { class: 'button disabled', text: 'next group ›' }));
    const example = group.example;
    const promptMessages = example && example.payload && Array.isArray(example.payload.prompt_messages) ? example.payload.prompt_messages : [];
    const head = h('section', { class: 'head' },
      h('h1', {}, `group `, h('span', { class: 'id', text: shortened(group.group_id, group), title: group.group_id }), ' ', group.no_signal ? badge('no learning signal', 'warn') : null),
      h('p', { class: 'muted' }, envLine(r.run, group), `example ${shortId(group)} · batch ${group.batch}${group.step !== null ? ` · step ${group.step}` : ''} · ${plural(group.siblings.length, 'sibling')}`));
    const stats = h('div', { class: 'cards' },
      statCard('group mean', fmt(group.mean), 'total reward'),
      statCard('group std', fmt(group.std), group.std > 0 ? 'advantage = (reward − mean) / std' : 'all siblings tie: advantages are 0'),
      ...names.map((name) => statCard(name, `${fmt(group.components[name].mean)} ± ${fmt(group.components[name].std)}`, 'mean ± std')));
    // the task every sibling answered, in view: its prompt and the fields its reward reads
    const promptCard = h('section', { class: 'card example-card' },
      h('h3', { text: 'example: prompt and fields' }),
      promptMessages.length ? promptMessages.map((m) => messageNode(m)) : h('p', { class: 'muted', text: example ? 'no prompt messages' : 'this example is not stored in the run' }),
      example ? fieldsTable(example.fields) : null);
    const grid = h('div', { class: 'siblings' }, group.siblings.map((s) => {
      const advantageClass = s.advantage > 0 ? 'up' : s.advantage < 0 ? 'down' : 'muted';
      return h('article', { class: `card sibling ${s.scored ? '' : 'failed'}` },
        h('div', { class: 'sib-head' }, h('a', { href: link.rollout(r.run, s.rollout_id), class: 'id', text: `#${s.sample_index}` }), reasonBadge(s.termination_reason, s.scored)),
        h('div', { class: 'sib-figures' },
          h('div', {}, h('span', { class: 'label', text: 'reward' }), h('span', { class: 'big', text: fmt(s.reward) })),
          h('div', {}, h('span', { class: 'label', text: 'advantage' }), h('span', { class: `big ${advantageClass}`, text: signed(s.advantage) }))),
        h('table', { class: 'mini-grid' }, h('tbody', {}, names.map((name) => h('tr', {}, h('td', { text: name }), h('td', { class: 'num' }, componentCell(s.rewards[name])))))),
        h('div', { class: 'muted small', text: `${plural(s.num_turns, 'turn')} · ${plural(s.num_tool_calls, 'tool call')} · ${plural(s.completion_tokens, 'token')} · ${secs(s.seconds)}` }),
        s.error ? h('div', { class: 'error-box small', text: s.error }) : null,
        s.final_text ? [h('div', { class: 'label', text: 'final answer' }), longText(s.final_text, 600, 12)]
          : s.error ? null : h('div', { class: 'muted small', text: 'no final answer' }),
        h('a', { href: link.rollout(r.run, s.rollout_id), class: 'button small', text: 'open rollout ›' }));
    }));
    put(app, head, nav, stats, promptCard, h('h2', { text: 'Siblings' }), h('div', { class: 'scroll-x' }, grid),
      group.logs.length ? h('section', { class: 'card' }, h('h3', { text: 'group logs (compute_group_rewards)' }), group.logs.map((log) => logRecord(log, group.started_at))) : null);
  }

  // ---------------------------------------------------------------- rollout view

  function rolloutCost(cost) {
    if (!cost) return null;
    const parts = (cost.calls || []).map((c) => `${c.role} ${c.model}: ${calls(c.requests)}${c.cache_hits ? ` + ${fmt(c.cache_hits)} from the cache` : ''}, ${usd(c.usd)}`);
    return h('p', { class: 'cost' }, h('strong', { text: `cost ${usd(cost.usd)}` }), parts.length ? ` · ${parts.join(' · ')}` : ' · no model calls');
  }

  // The rollout's OpenTelemetry trace id (--otel-endpoint), to look it up in a tracing UI;
  // nothing for a rollout that was not traced.
  function traceLine(traceId) {
    if (!traceId) return null;
    const copy = h('button', { type: 'button', class: 'button small', text: 'copy' });
    copy.addEventListener('click', () => copyText(traceId, copy));
    return h('p', { class: 'trace muted' }, 'trace ', h('span', { class: 'id', text: traceId, title: 'OpenTelemetry trace id' }), ' ', copy);
  }

  async function rolloutView(r) {
    const rec = await data.rollout(r.run, r.id);
    crumbs(['runs', link.runs()], [r.run, link.run(r.run)], ['group', link.group(r.run, rec.group_id)], [shortened(rec.rollout_id, rec), null]);
    const nav = rec.nav || {};
    const navLink = (id, label, rel) => (id ? h('a', { href: link.rollout(r.run, id), class: 'button', text: label, rel }) : h('span', { class: 'button disabled', text: label }));
    const exportable = { ...rec };
    delete exportable.nav;
    delete exportable.several_envs;  // the page's, not the rollout's (the download has neither)
    const json = JSON.stringify(exportable, null, 2);
    const copyButton = h('button', { type: 'button', class: 'button', text: 'copy JSON' });
    copyButton.addEventListener('click', () => copyText(json, copyButton));
    const download = h('a', { class: 'button', text: 'download JSON', download: `${fileName(rec.rollout_id)}.json`, href: STATIC ? '#' : `/api/runs/${enc(r.run)}/download/${enc(rec.rollout_id)}` });
    if (STATIC) download.addEventListener('click', () => { download.setAttribute('href', URL.createObjectURL(new Blob([json], { type: 'application/json' }))); });
    const toolbar = h('div', { class: 'navrow' },
      navLink(nav.prev_sibling, '‹ prev sibling', 'prev'), navLink(nav.next_sibling, 'next sibling ›', 'next'),
      h('span', { class: 'spacer' }),
      navLink(nav.prev, '‹ prev in run'), navLink(nav.next, 'next in run ›'),
      h('span', { class: 'spacer' }), copyButton, download);
    const head = h('section', { class: 'head' },
      h('h1', {}, h('span', { class: 'id', text: shortened(rec.rollout_id, rec), title: rec.rollout_id }), ' ', reasonBadge(rec.termination_reason, rec.scored)),
      h('p', { class: 'muted' }, envLine(r.run, rec), `example ${shortId(rec)} · sample ${rec.sample_index} · batch ${rec.batch}${rec.step !== null ? ` · step ${rec.step}` : ''} · ${rec.split} · started ${date(rec.started_at)}`),
      traceLine(rec.trace_id));
    const names = Object.keys(rec.rewards);
    const advantageClass = rec.advantage > 0 ? 'up' : rec.advantage < 0 ? 'down' : 'muted';
    const rewardCard = h('section', { class: 'card' }, h('h3', {}, 'reward ', h('span', { class: 'big', text: fmt(rec.reward) }), ' ',
      h('span', { class: 'advantage', title: 'advantage in its group: (reward − group mean) / group std' }, 'advantage ', h('span', { class: `big ${advantageClass}`, text: signed(rec.advantage) }),
        h('span', { class: 'muted small', text: ` (group mean ${fmt(rec.group_mean)})` }))),
      names.length ? fitted(table([
        { label: 'component', render: (row) => row.name },
        { label: 'value', num: true, render: (row) => fmt(row.value) },
        { label: 'raw (env emitted)', num: true, render: (row) => (row.filled ? h('span', { class: 'muted', text: '—' }) : fmt(row.value)) },
        { label: 'filled', render: (row) => (row.filled ? badge('zero-filled', 'warn') : h('span', { class: 'muted', text: 'no' })) },
      ], names.map((name) => ({ name, ...rec.rewards[name] })))) : h('p', { class: 'muted', text: 'no reward components (not scored)' }));
    const usageCard = h('section', { class: 'card' }, h('h3', { text: 'usage and timing' }),
      h('p', {}, `${fmt(rec.prompt_tokens)} prompt + ${plural(rec.completion_tokens, 'completion token')} · ${plural(rec.num_turns, 'turn')} · ${plural(rec.num_tool_calls, 'tool call')} · ${secs(rec.seconds)} in all`),
      rolloutCost(rec.cost),
      rec.turns.length ? table([
        { label: 'turn', num: true, render: (t) => h('a', { href: `#turn-${t.index}`, text: String(t.index) }) },
        { label: 'starts at', num: true, render: (t) => `+${secs(Math.max(0, t.started_at - rec.started_at))}` },
        { label: 'model', num: true, render: (t) => secs(t.model_seconds) },
        { label: 'tools', num: true, render: (t) => secs(t.tool_seconds) },
        { label: 'tokens in → out', num: true, render: (t) => `${fmt((t.usage || {}).prompt_tokens || 0)} → ${fmt((t.usage || {}).completion_tokens || 0)}` },
        { label: 'tool calls', num: true, render: (t) => fmt(t.tool_calls) },
        { label: 'finish', render: (t) => t.finish_reason || '—' },
        ...(rec.turns.some((t) => t.rewards || t.env_info) ? [
          { label: 'turn reward', render: (t) => turnRewardText(t.rewards) || '—' },
          { label: 'env verdict', render: (t) => t.env_info || '—' },
        ] : []),
      ], rec.turns) : null);
    const summary = h('div', { class: 'two-col' }, rewardCard, usageCard);
    const exampleCard = h('section', { class: 'card example-card' },
      h('h3', {}, 'example ', h('a', { href: link.run(r.run, `example=${enc(rec.example_id)}`), class: 'id mini', text: shortId(rec), title: rec.example_id })),
      h('div', { class: 'label', text: 'fields the reward reads (example_args)' }), fieldsTable(rec.example_fields));
    const errorBox = rec.error ? h('div', { class: 'error-box', role: 'alert' }, h('strong', { text: `${rec.termination_reason}: ` }), longText(rec.error, 2000, 30)) : null;
    const body = transcript(rec);
    const logCount = (rec.logs || []).length;
    const section = h('section', { class: 'card transcript-card' },
      h('div', { class: 'section-head' }, h('h3', { text: 'transcript' }), logCount ? logControls(body) : h('span', { class: 'muted', text: 'no log records' })),
      body);
    put(app, head, toolbar, errorBox, summary, exampleCard, section, tokenView(rec.turns),
      rec.sampling ? h('details', { class: 'card' }, h('summary', { text: 'sampling parameters' }), longText(JSON.stringify(rec.sampling, null, 2))) : null);
    if (location.hash) { const target = document.getElementById(location.hash.slice(1)); if (target) target.scrollIntoView(); }
  }

  // ---------------------------------------------------------------- boot

  async function render() {
    const r = route();
    const views = { runs: runsView, run: runView, group: groupView, rollout: rolloutView, compare: compareView };
    try {
      await (views[r.view] || runsView)(r);
      document.body.dataset.ready = r.view;
    } catch (error) {
      put(app, failure(error));
      document.body.dataset.ready = 'error';
    }
  }

  document.getElementById('brand').setAttribute('href', link.runs());
  render();
})();
