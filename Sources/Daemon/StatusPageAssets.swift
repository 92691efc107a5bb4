// The status page's three files, served from the binary (StatusPage).
// Raw string literals: the JavaScript's backslashes are its own.
//
// The script never turns data into markup: every value from /status.json
// or /lookup.json or the write API (labels from feeds, display names from callers) goes in
// through textContent or an attribute, and the Content-Security-Policy
// the page is served with refuses inline scripts and other origins.

enum StatusPageAssets {
    static let html = #"""
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <meta name="referrer" content="no-referrer">
    <title>lookupd</title>
    <link rel="icon" href="data:,">
    <link rel="stylesheet" href="status.css">
    <script src="status.js" defer></script>
    </head>
    <body>
    <header>
      <h1>lookupd</h1>
      <p id="summary" class="muted">loading…</p>
      <p id="problem" class="problem" hidden></p>
    </header>
    <noscript><p class="problem">This page needs JavaScript. The same facts: <a href="status.json">status.json</a>, <a href="metrics">metrics</a>.</p></noscript>
    <main>
      <section id="calls" aria-labelledby="calls-title">
        <h2 id="calls-title">Calls in the last hour</h2>
        <ul id="totals" class="legend"></ul>
        <svg id="chart" role="img" aria-label="calls per minute by verdict, the last hour"></svg>
        <p id="since-start" class="muted"></p>
      </section>
      <section id="lookup" aria-labelledby="lookup-title">
        <h2 id="lookup-title">Look up a number</h2>
        <form id="lookup-form" autocomplete="off">
          <input id="lookup-number" name="number" type="search" inputmode="tel" maxlength="256" required
                 placeholder="+8613800138000" aria-label="number">
          <button type="submit">Look up</button>
        </form>
        <dl id="lookup-result" class="result" hidden></dl>
      </section>
      <section id="change" aria-labelledby="change-title">
        <h2 id="change-title">Block, identify, allow or remove a number</h2>
        <p class="muted">Through the write API (/v1/entries, http-write-token-file). The token is kept in this page's memory
          only: it is never stored, and reloading the page forgets it.</p>
        <form id="token-form" autocomplete="off">
          <input id="token" type="password" autocomplete="off" maxlength="4096" placeholder="write API token" aria-label="write API token">
          <button type="submit">Use token</button>
          <button id="token-forget" type="button" class="plain">Forget</button>
        </form>
        <p id="token-state" class="muted">No token entered.</p>
        <form id="change-form" class="fields" autocomplete="off">
          <label>Number <input id="change-number" type="text" inputmode="tel" maxlength="256" required placeholder="+8613800138000"></label>
          <label>Action <select id="change-action">
            <option value="block">Block</option><option value="identify">Identify (label only)</option>
            <option value="allow">Allow (over lower-priority blocks)</option><option value="remove">Remove</option>
          </select></label>
          <label>Label <input id="change-label" type="text" maxlength="255" placeholder="optional for a block"></label>
          <label>Expires <input id="change-expires" type="text" maxlength="64" value="24h" placeholder="24h, 7d, 2026-12-31T18:00:00Z or empty"></label>
          <label>Directory <select id="change-directory"></select></label>
          <button type="submit">Apply</button>
        </form>
        <dl id="change-result" class="result" hidden></dl>
      </section>
      <section id="recent" aria-labelledby="recent-title">
        <h2 id="recent-title">Last blocked and identified calls</h2>
        <p id="recent-note" class="muted" hidden></p>
        <table id="recent-calls" class="cards">
          <thead><tr><th>Time</th><th>Verdict</th><th>Caller</th><th>Callee</th><th>Label</th><th>Source</th><th>Display name</th><th>Answer</th></tr></thead>
          <tbody></tbody>
        </table>
      </section>
      <section id="directories" aria-labelledby="directories-title">
        <h2 id="directories-title">Directories</h2>
        <table id="directory-table" class="cards">
          <thead><tr><th>Directory</th><th>Entries</th><th>Prefix rules</th><th>Version</th><th>Journal</th><th>Feeds</th></tr></thead>
          <tbody></tbody>
        </table>
        <p id="contacts" class="muted"></p>
      </section>
    </main>
    <footer class="muted">
      <span id="updated"></span> · <a href="status.json">status.json</a> · <a href="metrics">metrics</a>
    </footer>
    </body>
    </html>

    """#

    static let css = #"""
    :root {
      --bg: #f6f7f9; --fg: #1d2329; --muted: #5d6873; --card: #fff; --line: #dde1e6;
      --blocked: #c62828; --identified: #1565c0; --contact: #2e7d32; --unknown: #9aa3ab;
      --anonymous: #6a1b9a; --invalid: #ef6c00; --bypassed: #00838f;
      color-scheme: light dark;
    }
    @media (prefers-color-scheme: dark) {
      :root { --bg: #15191d; --fg: #e6e9ec; --muted: #9aa5b1; --card: #1e2328; --line: #343b42; --unknown: #6f7a84; }
    }
    * { box-sizing: border-box; }
    body {
      margin: 0 auto; max-width: 1100px; padding: 1rem; background: var(--bg); color: var(--fg);
      font: 15px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif;
    }
    h1 { font-size: 1.5rem; margin: 0; }
    h2 { font-size: 1.1rem; margin: 0 0 .6rem; }
    header { margin-bottom: 1rem; }
    section { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 1rem; margin-bottom: 1rem; }
    a { color: var(--identified); }
    .muted { color: var(--muted); margin: .3rem 0; }
    .problem { background: #fdecea; color: #8a1c1c; border: 1px solid #f5c2c0; border-radius: 6px; padding: .5rem .75rem; }
    .legend { list-style: none; display: flex; flex-wrap: wrap; gap: .4rem 1.2rem; padding: 0; margin: 0 0 .6rem; }
    .legend li { display: flex; align-items: center; gap: .35rem; }
    .legend .count { font-variant-numeric: tabular-nums; }
    .swatch { width: .8rem; height: .8rem; border-radius: 2px; display: inline-block; }
    #chart { width: 100%; height: 170px; display: block; }
    #chart .axis { fill: var(--muted); font-size: 10px; }
    #chart .grid { stroke: var(--line); stroke-width: 1; }
    .v-blocked { background: var(--blocked); fill: var(--blocked); }
    .v-identified { background: var(--identified); fill: var(--identified); }
    .v-contact { background: var(--contact); fill: var(--contact); }
    .v-unknown { background: var(--unknown); fill: var(--unknown); }
    .v-anonymous { background: var(--anonymous); fill: var(--anonymous); }
    .v-invalid { background: var(--invalid); fill: var(--invalid); }
    .v-bypassed { background: var(--bypassed); fill: var(--bypassed); }
    .verdict { color: #fff; border-radius: 4px; padding: 0 .4rem; font-size: .85rem; white-space: nowrap; }
    form { display: flex; gap: .5rem; }
    input, select { flex: 1; min-width: 0; font: inherit; padding: .45rem .6rem; border: 1px solid var(--line);
      border-radius: 6px; background: var(--bg); color: var(--fg); }
    button { font: inherit; padding: .45rem 1rem; border: 0; border-radius: 6px; background: var(--identified); color: #fff; cursor: pointer; }
    button.plain { background: transparent; color: var(--identified); border: 1px solid var(--line); }
    form.fields { flex-wrap: wrap; align-items: flex-end; margin-top: .6rem; }
    form.fields label { display: flex; flex-direction: column; flex: 1 1 10rem; min-width: 0; color: var(--muted); font-size: .85rem; gap: .2rem; }
    form.fields input, form.fields select { flex: none; width: 100%; font-size: 15px; }
    .result dd[data-field=status][data-ok=no] { color: var(--blocked); font-weight: 600; }
    .result { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin: .8rem 0 0; }
    .result dt { color: var(--muted); }
    .result dd { margin: 0; overflow-wrap: anywhere; }
    table { width: 100%; border-collapse: collapse; }
    th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; overflow-wrap: break-word; }
    th { color: var(--muted); font-weight: 600; font-size: .85rem; white-space: nowrap; }
    td[data-field=time], td[data-field=caller], td[data-field=callee], td[data-field=response], td[data-field=verdict] {
      font-variant-numeric: tabular-nums; white-space: nowrap; }
    td[data-field=label], td[data-field=display-name], td[data-field=directory] { overflow-wrap: anywhere; }
    .small { display: block; color: var(--muted); font-size: .82rem; }
    footer { text-align: center; padding: .5rem 0 1rem; }
    /* A phone: each row becomes a card of label/value lines. */
    @media (max-width: 640px) {
      body { padding: .6rem; font-size: 14px; }
      section { padding: .75rem; }
      table.cards thead { display: none; }
      table.cards, table.cards tbody, table.cards tr, table.cards td { display: block; width: 100%; }
      table.cards tr { border: 1px solid var(--line); border-radius: 6px; padding: .3rem .5rem; margin-bottom: .5rem; }
      table.cards td { display: grid; grid-template-columns: 7.5rem minmax(0, 1fr); gap: .5rem; border: 0; padding: .15rem 0;
        white-space: normal; overflow-wrap: anywhere; }
      table.cards td::before { content: attr(data-label); color: var(--muted); font-size: .85rem; }
    }

    """#

    static let script = #"""
    'use strict';
    // lookupd's status page: /status.json every 10 s, /lookup.json on demand, /v1/entries from its form.
    (() => {
      const refreshMs = 10000;
      const svgNS = 'http://www.w3.org/2000/svg';
      const knownVerdicts = ['blocked', 'identified', 'contact', 'unknown', 'anonymous', 'invalid', 'bypassed'];
      const $ = (id) => document.getElementById(id);

      // Elements from data: text always goes in as a text node.
      function el(tag, attributes = {}, ...children) {
        const e = tag.startsWith('svg:') ? document.createElementNS(svgNS, tag.slice(4)) : document.createElement(tag);
        for (const [name, value] of Object.entries(attributes)) if (value !== null && value !== undefined) e.setAttribute(name, value);
        for (const child of children) if (child !== null && child !== undefined) e.append(child instanceof Node ? child : String(child));
        return e;
      }
      const verdictClass = (v) => knownVerdicts.includes(v) ? 'v-' + v : 'v-unknown';
      const verdictChip = (v) => el('span', {class: 'verdict ' + verdictClass(v), 'data-verdict': v}, v);
      const count = (n) => Number(n).toLocaleString('en-US');
      const pad = (n) => String(n).padStart(2, '0');
      function clock(date) {
        const today = new Date().toDateString() === date.toDateString();
        const time = `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
        return today ? time : `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${time}`;
      }
      function age(seconds) {
        if (seconds < 90) return `${Math.max(0, Math.round(seconds))} s`;
        if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
        if (seconds < 172800) return `${Math.round(seconds / 3600)} h`;
        return `${Math.round(seconds / 86400)} d`;
      }

      // Every request goes through here: the answer's status and its body
      // (parsed when it is JSON), never cookies (the write API wants its token).
      async function exchange(path, options = {}) {
        const response = await fetch(path, {cache: 'no-store', credentials: 'omit', ...options});
        const type = response.headers.get('Content-Type') || '';
        const body = type.startsWith('application/json') ? await response.json() : await response.text();
        return {status: response.status, statusText: response.statusText, ok: response.ok, body};
      }
      const answerText = (body) => typeof body === 'string' ? body.trim() : JSON.stringify(body);
      async function request(path, options = {}) {
        const answer = await exchange(path, options);
        if (!answer.ok) throw new Error(`${answer.status}: ${answerText(answer.body)}`);
        return answer.body;
      }

      function showProblem(text) {
        $('problem').textContent = text || '';
        $('problem').hidden = !text;
      }

      function renderSummary(s) {
        const workers = `${s.workers} worker${s.workers === 1 ? '' : 's'}`;
        $('summary').textContent = `version ${s.version} · ${s.mode} mode · generation ${s.generation} · up ${age(s.uptime_seconds)} · ${workers}`;
        const failed = s.reloads.last_error;
        showProblem(failed ? `The last reload failed; generation ${s.generation} is still in force: ${failed}` : '');
      }

      function renderCalls(s) {
        const totals = s.verdicts.map((_, i) => s.minutes.reduce((sum, m) => sum + m.counts[i], 0));
        const legend = s.verdicts.map((v, i) => el('li', {'data-verdict': v},
          el('span', {class: 'swatch ' + verdictClass(v)}), el('span', {}, v), el('strong', {class: 'count'}, count(totals[i]))));
        $('totals').replaceChildren(...legend);
        const all = s.totals.reduce((a, b) => a + b, 0);
        $('since-start').textContent = `${count(all)} screened call${all === 1 ? '' : 's'} since the daemon started (${age(s.uptime_seconds)} ago).`;
        renderChart(s);
      }

      // Stacked bars, one per minute, the current minute on the right, drawn
      // in the chart's own pixels (so the text keeps its size on a phone).
      let lastStatus = null;
      function renderChart(s) {
        const chart = $('chart');
        const width = Math.max(200, Math.round(chart.getBoundingClientRect().width) || 600), height = 170;
        const left = 36, right = 4, top = 8, bottom = 22, slots = 60;
        chart.setAttribute('viewBox', `0 0 ${width} ${height}`);
        const plot = height - top - bottom, slot = (width - left - right) / slots;
        const current = s.minutes.length ? s.minutes[s.minutes.length - 1].start : s.now - s.now % 60;
        const peak = Math.max(1, ...s.minutes.map((m) => m.counts.reduce((a, b) => a + b, 0)));
        const magnitude = 10 ** Math.floor(Math.log10(peak));
        const scale = Math.max(2, [1, 2, 4, 6, 8, 10].map((f) => f * magnitude).find((v) => v >= peak));
        const parts = [];
        for (const f of [0, 0.5, 1]) {
          const y = top + plot - f * plot;
          parts.push(el('svg:line', {class: 'grid', x1: left, x2: width - right, y1: y, y2: y}));
          parts.push(el('svg:text', {class: 'axis', x: left - 4, y: y + 3, 'text-anchor': 'end'}, count(f * scale)));
        }
        for (const m of s.minutes) {
          const index = slots - 1 - (current - m.start) / 60;
          if (index < 0) continue;
          const group = el('svg:g', {});
          let y = top + plot;
          m.counts.forEach((c, i) => {
            if (!c) return;
            const h = c / scale * plot;
            y -= h;
            group.append(el('svg:rect', {class: verdictClass(s.verdicts[i]), x: left + index * slot + 0.5, y, width: Math.max(1, slot - 1), height: h}));
          });
          const described = m.counts.map((c, i) => c ? `${c} ${s.verdicts[i]}` : '').filter(Boolean).join(', ') || 'no calls';
          group.append(el('svg:title', {}, `${clock(new Date(m.start * 1000)).slice(-8, -3)}: ${described}`));
          parts.push(group);
        }
        for (const [label, x, anchor] of [['60 min ago', left, 'start'], ['30 min', left + (width - left - right) / 2, 'middle'], ['now', width - right, 'end']]) {
          parts.push(el('svg:text', {class: 'axis', x, y: height - 6, 'text-anchor': anchor}, label));
        }
        chart.replaceChildren(...parts);
        lastStatus = s;
      }
      window.addEventListener('resize', () => { if (lastStatus) renderChart(lastStatus); });

      // One element inside: a phone shows the cell as a label/value grid of two.
      function cell(field, label, ...content) {
        return el('td', {'data-field': field, 'data-label': label}, el('div', {}, ...content));
      }

      function renderRecent(s) {
        const logged = s.recent.logged;
        let note = '';
        if (!logged.includes('blocked')) note = 'The decision log records no calls at this log-level; set log-level = info or log-file to list them here.';
        else if (!logged.includes('identified')) note = 'Identified calls are not in the decision log at this log-level; set log-level = info or log-file to list them here.';
        $('recent-note').textContent = note;
        $('recent-note').hidden = !note;
        const rows = s.recent.calls.map((c) => el('tr', {},
          cell('time', 'Time', c.time ? clock(new Date(c.time)) : ''),
          cell('verdict', 'Verdict', verdictChip(c.verdict)),
          cell('caller', 'Caller', c.caller),
          cell('callee', 'Callee', c.callee),
          cell('label', 'Label', c.label),
          cell('source', 'Source', c.source, c.rule && c.rule !== c.caller ? el('span', {class: 'small'}, c.rule) : null),
          cell('display-name', 'Display name', c['display-name']),
          cell('response', 'Answer', c.response)));
        if (!rows.length) rows.push(el('tr', {}, el('td', {colspan: 8, class: 'muted'}, 'No blocked or identified calls since the daemon started.')));
        $('recent-calls').tBodies[0].replaceChildren(...rows);
      }

      function renderDirectories(s) {
        const rows = s.directories.map((d) => {
          const j = d.journal;
          const unmerged = j.sequence - j.merged_sequence;
          const feeds = d.feeds.map((f) => el('span', {class: 'small', 'data-feed': f.name},
            `${f.name} ${f.version || '(never installed)'}`,
            f.updated ? ` · installed ${age(s.now - f.updated)} ago` : '',
            f.checked ? ` · checked ${age(s.now - f.checked)} ago` : '',
            f.error ? ` · last update failed: ${f.error}` : ''));
          return el('tr', {'data-directory': d.name},
            cell('directory', 'Directory', d.name, d.active_now ? null : ' (outside its active window)', el('span', {class: 'small'}, d.path)),
            cell('entries', 'Entries', count(d.entries), el('span', {class: 'small'}, `${count(d.blocking)} blocking, ${count(d.labelled)} with a label`)),
            cell('prefix_rules', 'Prefix rules', count(d.prefix_rules)),
            cell('version', 'Version', String(d.version), el('span', {class: 'small', title: 'content checksum'}, d.checksum)),
            cell('journal', 'Journal', `${count(j.entries)} in force`,
              el('span', {class: 'small'}, `${count(j.bytes)} bytes · ${count(unmerged)} record${unmerged === 1 ? '' : 's'} not compacted`)),
            cell('feeds', 'Feeds', ...(feeds.length ? feeds : ['none'])));
        });
        $('directory-table').tBodies[0].replaceChildren(...rows);
        offerDirectories(s.directories.map((d) => d.name));
        const lists = s.contacts.map((c) => `${c.name} (${count(c.numbers)})`).join(', ');
        $('contacts').textContent = lists ? `Contacts: ${lists}` : 'No contacts lists.';
      }

      async function refresh() {
        try {
          const s = await request('status.json');
          renderSummary(s);
          renderCalls(s);
          renderRecent(s);
          renderDirectories(s);
          $('updated').textContent = `updated ${clock(new Date())}`;
          document.body.dataset.loaded = 'yes';
        } catch (error) {
          showProblem(`Cannot read status.json: ${error.message}`);
        }
      }

      // What `lookupd query` says about a number.
      async function lookup(event) {
        event.preventDefault();
        const number = $('lookup-number').value.trim();
        const result = $('lookup-result');
        if (!number) return;
        try {
          const d = await request('lookup.json?number=' + encodeURIComponent(number));
          const rows = [['Verdict', 'verdict', verdictChip(d.verdict)], ['Number', 'number', d.number || '(not a number)'],
            ['Label', 'label', d.label], ['Source', 'source', d.source], ['Rule', 'match', d.match], ['Reason', 'reason', d.reason],
            ['Policy', 'policy', d.policy], ['Outside its window', 'inactive', d.inactive], ['Journal record', 'record', d.record]];
          result.replaceChildren(...rows.filter((r) => r[2] !== null && r[2] !== undefined)
            .flatMap(([label, field, value]) => [el('dt', {}, label), el('dd', {'data-field': field}, value)]));
        } catch (error) {
          result.replaceChildren(el('dt', {}, 'Error'), el('dd', {'data-field': 'error'}, error.message));
        }
        result.hidden = false;
      }

      // The write API's form. The token lives in this variable only: not in
      // storage, a cookie or the URL, and not left in the field either.
      let writeToken = '';
      function holdToken(token) {
        writeToken = token;
        $('token').value = '';
        $('token-state').textContent = token ? 'A token is held in this page\'s memory.' : 'No token entered.';
      }
      $('token-form').addEventListener('submit', (event) => { event.preventDefault(); holdToken($('token').value.trim()); });
      $('token-forget').addEventListener('click', () => holdToken(''));

      // The API takes the first directory when none is named; kept as chosen across refreshes.
      function offerDirectories(names) {
        const select = $('change-directory');
        const offered = [...select.options].map((o) => o.value);
        if (offered.join('\n') === names.join('\n')) return;
        const chosen = select.value;
        select.replaceChildren(...names.map((name) => el('option', {value: name}, name)));
        if (names.includes(chosen)) select.value = chosen;
      }

      const expiresField = () => $('change-expires');
      $('change-action').addEventListener('change', () => { expiresField().disabled = $('change-action').value === 'remove'; });

      // What the API said, as the operator would want it read: one line per change.
      function describe(body) {
        if (typeof body === 'string') return [body.trim()];
        if (body && Array.isArray(body.changes)) {
          return body.changes.map((c) => {
            const label = c.label ? `, label “${c.label}”` : '';
            const until = c.expires_at ? ` until ${c.expires_at}` : '';
            const record = c.record !== null && c.record !== undefined ? `journal record ${c.record}` : 'nothing written';
            return `${c.number}: ${c.outcome} (${c.action}${label}${until}) in ${body.directory}, ${record}`;
          });
        }
        if (body && body.error) return [`${body.error}: ${body.number}`];
        return [JSON.stringify(body)];
      }

      async function change(event) {
        event.preventDefault();
        const result = $('change-result');
        const number = $('change-number').value.trim();
        const action = $('change-action').value;
        const directory = $('change-directory').value;
        if (!number) return;
        const headers = writeToken ? {Authorization: 'Bearer ' + writeToken} : {};
        let path, options;
        if (action === 'remove') {
          path = 'v1/entries/' + encodeURIComponent(number) + (directory ? '?directory=' + encodeURIComponent(directory) : '');
          options = {method: 'DELETE', headers};
        } else {
          const entry = {number, action};
          const label = $('change-label').value.trim();
          const expires = expiresField().value.trim();
          if (label) entry.label = label;
          if (expires) entry.expires = expires;
          if (directory) entry.directory = directory;
          path = 'v1/entries';
          options = {method: 'POST', headers: {...headers, 'Content-Type': 'application/json'}, body: JSON.stringify(entry)};
        }
        let rows;
        try {
          const answer = await exchange(path, options);
          const status = el('dd', {'data-field': 'status', 'data-ok': answer.ok ? 'yes' : 'no'}, `${answer.status} ${answer.statusText}`);
          rows = [el('dt', {}, 'Answer'), status, el('dt', {}, 'Message'),
                  el('dd', {'data-field': 'message'}, ...describe(answer.body).flatMap((line, i) => i ? [el('br'), line] : [line]))];
          // The daemon's journal watcher takes the change in within 100 ms; the directories show it then.
          if (answer.ok) setTimeout(refresh, 400);
        } catch (error) {
          rows = [el('dt', {}, 'Error'), el('dd', {'data-field': 'error'}, error.message)];
        }
        result.replaceChildren(...rows);
        result.hidden = false;
      }

      $('lookup-form').addEventListener('submit', lookup);
      $('change-form').addEventListener('submit', change);
      refresh();
      setInterval(refresh, refreshMs);
    })();

    """#
}
