// nanohost dashboard: live run pages without a build step.
// Everything that comes from a run (agent text, labels, questions) is put
// into the page with textContent, never as HTML. The one exception is the
// graph, an SVG the server renders with every label escaped.
(function () {
  'use strict';

  function $(sel, root) { return (root || document).querySelector(sel); }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function notice(text, kind) {
    var n = $('#notice');
    if (!n) return;
    n.textContent = text;
    n.className = 'notice ' + (kind || '');
    n.hidden = !text;
  }

  function postJSON(url, body) {
    return fetch(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Accept': 'application/json' },
      body: JSON.stringify(body || {}),
      credentials: 'same-origin'
    }).then(function (res) {
      return res.json().catch(function () { return {}; }).then(function (data) {
        return { ok: res.ok, status: res.status, data: data };
      });
    });
  }

  function getJSON(url) {
    return fetch(url, { headers: { 'Accept': 'application/json' }, credentials: 'same-origin' })
      .then(function (res) { if (!res.ok) throw new Error(url + ': ' + res.status); return res.json(); });
  }

  // optionText is a choice as chat shows it: its label with its
  // accelerator key ("[A] Approve"), like channels.OptionText.
  function optionText(o) {
    var label = o.label || o.to;
    if (!o.key || label.indexOf('[' + o.key + ']') >= 0 || label.indexOf(o.key + ')') === 0) return label;
    return '[' + o.key + '] ' + label;
  }

  // prettyJSON re-indents JSON so escapes like \u003c read as the text
  // they stand for (it is shown with textContent, never as markup).
  function prettyJSON(text) {
    try { return JSON.stringify(JSON.parse(text), null, 2); } catch (_) { return text; }
  }

  function money(usd) {
    if (!usd || usd <= 0) return '—';
    if (usd < 0.01) return '<$0.01';
    return '$' + usd.toFixed(2);
  }

  function duration(ms) {
    if (!ms || ms <= 0) return '—';
    if (ms < 1000) return ms + 'ms';
    var s = Math.round(ms / 1000);
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm ' + (s % 60) + 's';
    return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
  }

  // ---- workspace changes: files, each a collapsible, highlighted diff ----
  // The server sends each diff line as [class, text] tokens; they become
  // spans with textContent, like every other piece of agent output.
  function plural(n, word) { return n + ' ' + word + (n === 1 ? '' : 's'); }

  function changesSummary(t) {
    return plural(t.files, 'file') + ' (+' + t.lines_added + ' \u2212' + t.lines_deleted + ')';
  }

  var changeMarks = { added: 'A', modified: 'M', deleted: 'D' };
  var noDiffText = {
    'binary': 'binary file, not diffed', 'too large': 'too large to diff', 'content unavailable': 'content not available',
    'special file': 'not a regular file', "over the stage's diff limit": "over the stage's diff limit: see the raw diff"
  };

  function diffTable(f) {
    var table = el('table', { 'class': 'diff' });
    var body = el('tbody');
    f.hunks.forEach(function (h) {
      var hr = el('tr', { 'class': 'hunk' });
      // An empty range is written with the line before it, as diff does.
      var range = function (start, n) { return (n ? start : start - 1) + ',' + n; };
      hr.appendChild(el('td', { colspan: '3' }, '@@ -' + range(h.old_start, h.old_lines) + ' +' + range(h.new_start, h.new_lines) + ' @@' + (h.section ? ' ' + h.section : '')));
      body.appendChild(hr);
      h.lines.forEach(function (l) {
        var tr = el('tr', { 'class': l.op === '+' ? 'add' : l.op === '-' ? 'del' : 'ctx' });
        tr.appendChild(el('td', { 'class': 'ln' }, l.old ? String(l.old) : ''));
        tr.appendChild(el('td', { 'class': 'ln' }, l.new ? String(l.new) : ''));
        var code = el('td', { 'class': 'code' });
        code.appendChild(el('span', { 'class': 'op' }, l.op === ' ' ? ' ' : l.op));
        (l.tokens && l.tokens.length ? l.tokens : [['', l.text]]).forEach(function (t) {
          code.appendChild(t[0] ? el('span', { 'class': 'tk-' + t[0] }, t[1]) : document.createTextNode(t[1]));
        });
        if (l.no_eol) code.appendChild(el('span', { 'class': 'noeol', title: 'No newline at end of file' }, '\u2424'));
        tr.appendChild(code);
        body.appendChild(tr);
      });
    });
    table.appendChild(body);
    return table;
  }

  // renderChanges fills box with a change set (GET …/changes).
  function renderChanges(box, set) {
    box.replaceChildren();
    if (!set.files.length) {
      box.appendChild(el('p', { 'class': 'muted' }, 'No files changed.'));
      return;
    }
    if (set.overlapped && set.overlapped.length) {
      box.appendChild(el('p', { 'class': 'notice' }, 'Ran alongside ' + set.overlapped.map(function (o) {
        return o.node_id + (o.run_id !== set.run_id ? ' (run ' + o.run_id + ')' : '');
      }).join(', ') + ' on the same workspace: changes made by either are included.'));
    }
    var lines = 0;
    set.files.forEach(function (f) { f.hunks && f.hunks.forEach(function (h) { lines += h.lines.length; }); });
    set.files.forEach(function (f) {
      var d = el('details', { 'class': 'change ' + f.change, 'data-path': f.path });
      // Small change sets open whole; big ones open as a list.
      if (lines <= 400) d.open = true;
      var s = el('summary');
      s.appendChild(el('span', { 'class': 'chg ' + f.change, title: f.change }, changeMarks[f.change] || '?'));
      s.appendChild(el('code', { 'class': 'path' }, f.path + (f.kind === 'symlink' ? ' \u2192 ' + f.target : '')));
      var notes = [];
      if (f.lines_added || f.lines_deleted) notes.push('+' + (f.lines_added || 0) + ' \u2212' + (f.lines_deleted || 0));
      if (f.old_mode) notes.push(f.old_mode + ' \u2192 ' + f.mode);
      if (f.binary) notes.push('binary');
      if (f.no_diff && f.no_diff !== 'binary') notes.push(noDiffText[f.no_diff] || f.no_diff);
      if (f.diff_truncated) notes.push('diff cut short');
      notes.push(f.bytes + ' B');
      s.appendChild(el('span', { 'class': 'stat' }, notes.join(' \u00b7 ')));
      d.appendChild(s);
      if (f.hunks && f.hunks.length) d.appendChild(diffTable(f));
      box.appendChild(d);
    });
    var raw = el('p', { 'class': 'raw-links' });
    Object.keys(set.raw || {}).forEach(function (name) {
      raw.appendChild(el('a', { href: set.raw[name] }, name));
      raw.appendChild(document.createTextNode(' '));
    });
    if (set.truncated) raw.appendChild(el('span', { 'class': 'muted' }, 'Some diffs were cut at their size limit; the raw diff has what was recorded.'));
    box.appendChild(raw);
  }

  // ---- graph marks: how often a node ran, its attempt, how long it took ----
  // The server writes them on each visited node's group (data-visits,
  // data-attempt, data-max-attempts, data-last); they are drawn here, where
  // the node's drawn box is known whatever laid the graph out.
  var svgNS = 'http://www.w3.org/2000/svg';

  function badge(g, x, y, text, kind) {
    var b = document.createElementNS(svgNS, 'g');
    b.setAttribute('class', 'mark ' + kind);
    var t = document.createElementNS(svgNS, 'text');
    t.setAttribute('x', x);
    t.setAttribute('y', y);
    t.setAttribute('text-anchor', 'middle');
    t.setAttribute('dominant-baseline', 'central');
    t.textContent = text;
    b.appendChild(t);
    g.appendChild(b);
    var tb = t.getBBox();
    var r = document.createElementNS(svgNS, 'rect');
    var h = tb.height + 2;
    r.setAttribute('x', tb.x - 5);
    r.setAttribute('y', y - h / 2);
    r.setAttribute('width', tb.width + 10);
    r.setAttribute('height', h);
    r.setAttribute('rx', h / 2);
    b.insertBefore(r, t);
  }

  function markNodes(root) {
    (root || document).querySelectorAll('#graph g.node[data-visits]').forEach(function (g) {
      g.querySelectorAll('g.mark').forEach(function (m) { m.remove(); });
      var shape = g.querySelector('rect, polygon, ellipse, circle, path') || g;
      var box = shape.getBBox();
      var visits = Number(g.dataset.visits);
      if (visits > 1) badge(g, box.x + box.width - 4, box.y + 2, '\u00d7' + visits, 'visits');
      var facts = [];
      if (g.dataset.last) facts.push(g.dataset.last);
      if (Number(g.dataset.attempt) > 1) facts.push('try ' + g.dataset.attempt + (Number(g.dataset.maxAttempts) > 0 ? '/' + g.dataset.maxAttempts : ''));
      if (facts.length) badge(g, box.x + box.width / 2, box.y + box.height, facts.join(' \u00b7 '), 'last');
    });
  }

  // ---- runs list: refresh the table while runs are live ----
  // refreshRuns replaces the table with the server's current one; it
  // resolves when done (highlighting the run named by mark, if any).
  var refreshRuns = function () { return Promise.resolve(); };

  function setupRunsList() {
    if (!$('#runs')) return;
    refreshRuns = function (mark) {
      return fetch(location.href, { headers: { 'Accept': 'text/html' }, credentials: 'same-origin' })
        .then(function (res) { return res.ok ? res.text() : null; })
        .then(function (html) {
          if (!html) return;
          var doc = new DOMParser().parseFromString(html, 'text/html');
          var fresh = doc.getElementById('runs');
          if (!fresh) return;
          $('#runs').replaceWith(fresh);
          if (mark) {
            var a = fresh.querySelector('a[href="/runs/' + CSS.escape(mark) + '"]');
            if (a) a.closest('tr').classList.add('new');
          }
        }).catch(function () {});
    };
    setInterval(function () {
      var box = $('#runs');
      if (box.dataset.live !== 'true' || document.hidden) return;
      var marked = box.querySelector('tr.new a');
      refreshRuns(marked ? marked.textContent : '');
    }, 3000);
  }

  // ---- start form: POST /pipelines; diagnostics point at their lines ----
  function setupStartForm() {
    var form = $('#start-form');
    if (!form) return;
    var dot = form.elements.dot;
    var result = $('#start-result');

    // A stored pipeline is run by name: the DOT box is not needed then.
    var stored = form.elements.pipeline;
    function storedChosen() { return stored && stored.value !== ''; }
    // The inputs the pipeline declares (graph [inputs="repo,ref"]) get a
    // field each: a stored pipeline's are listed with it, a pasted one's
    // are read from its text.
    var inputBox = $('#start-input-fields');
    function declaredInputs() {
      var text = '';
      if (storedChosen()) {
        text = stored.options[stored.selectedIndex].dataset.inputs || '';
      } else {
        var m = /\binputs\s*=\s*"([^"]*)"/.exec(dot.value);
        text = m ? m[1] : '';
      }
      var seen = {};
      return text.split(/[\s,]+/).filter(function (k) {
        if (!k || seen[k]) return false;
        seen[k] = true;
        return true;
      });
    }
    function syncInputs() {
      var keys = declaredInputs(), had = {};
      inputBox.querySelectorAll('input[data-input]').forEach(function (f) { had[f.dataset.input] = f.value; });
      if (keys.join(',') === Object.keys(had).join(',')) return;
      inputBox.replaceChildren();
      keys.forEach(function (k) {
        var f = el('input', { type: 'text', name: 'input.' + k, 'data-input': k, required: '', autocomplete: 'off', spellcheck: 'false' });
        f.value = had[k] || '';
        var label = el('label', {}, k + ' ');
        label.appendChild(el('small', {}, '(needed: input.' + k + ')'));
        label.appendChild(f);
        inputBox.appendChild(label);
      });
      inputBox.hidden = keys.length === 0;
    }
    var inputTimer = null;
    dot.addEventListener('input', function () { clearTimeout(inputTimer); inputTimer = setTimeout(syncInputs, 300); });
    if (stored) {
      var syncStored = function () { $('#start-dot-box').hidden = storedChosen(); syncInputs(); };
      stored.addEventListener('change', syncStored);
      syncStored();
    }

    form.elements.file.addEventListener('change', function () {
      var f = form.elements.file.files[0];
      if (!f) return;
      f.text().then(function (text) { dot.value = text; syncInputs(); }, function (err) {
        showResult('error', 'Could not read ' + f.name + ': ' + err.message);
      });
    });

    function showResult(kind, text) {
      result.replaceChildren();
      result.className = 'start-result notice ' + kind;
      result.appendChild(el('p', {}, text));
      return result;
    }

    // Selects line n of the DOT, so the person sees what a diagnostic means.
    function selectLine(n) {
      var lines = dot.value.split('\n');
      if (n < 1 || n > lines.length) return;
      var start = 0;
      for (var i = 0; i < n - 1; i++) start += lines[i].length + 1;
      dot.focus();
      dot.setSelectionRange(start, start + lines[n - 1].length);
      var lh = dot.scrollHeight / Math.max(lines.length, 1);
      dot.scrollTop = Math.max(0, (n - 3) * lh);
    }

    // diagnostics lists lint findings, each with the line it is about.
    function diagnostics(diags) {
      var list = el('ul', { 'class': 'diags' });
      diags.forEach(function (d) {
        var li = el('li', { 'class': 'diag ' + d.severity });
        var where = d.line ? 'line ' + d.line + (d.column ? ':' + d.column : '') : 'pipeline';
        var at = el(d.line ? 'button' : 'span', d.line ? { type: 'button', 'class': 'at link', 'data-line': String(d.line) } : { 'class': 'at' }, where);
        li.appendChild(at);
        // A message that names its node already ("node greet: …") is not prefixed with it again.
        var node = d.node_id && d.message.indexOf('node ' + d.node_id + ':') !== 0 ? ' node ' + d.node_id : '';
        li.appendChild(document.createTextNode(' ' + d.severity + (d.rule ? ' [' + d.rule + ']' : '') + node + ': ' + d.message));
        if (d.fix) li.appendChild(el('div', { 'class': 'fix' }, 'Fix: ' + d.fix));
        list.appendChild(li);
      });
      return list;
    }

    function showRefusal(r) {
      var diags = r.data.diagnostics || [];
      if (!diags.length) {
        showResult('error', (r.data.error || ('The run was refused (' + r.status + ')')) + (r.data.fix ? ' — ' + r.data.fix : ''));
        return;
      }
      var errors = diags.filter(function (d) { return d.severity === 'error'; }).length;
      var box = showResult('error', errors ? 'The pipeline does not validate: ' + errors + ' error' + (errors === 1 ? '' : 's') +
        ' to fix (click a line number to see it).' : 'Not started: ' + r.data.error + ' (click a line number to see it).');
      box.appendChild(diagnostics(diags));
      var first = diags.filter(function (d) { return d.severity === 'error' && d.line; })[0];
      if (first) selectLine(first.line);
    }

    result.addEventListener('click', function (ev) {
      var b = ev.target.closest('button[data-line]');
      if (b) selectLine(Number(b.dataset.line));
    });

    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      if (!storedChosen() && !dot.value.trim()) {
        showResult('error', stored ? 'Pick a stored pipeline, or paste a pipeline (a DOT digraph) or load a .dot file.' :
          'Paste a pipeline (a DOT digraph) or load a .dot file first.');
        (stored || dot).focus();
        return;
      }
      var body = storedChosen() ? { pipeline: stored.value } : { dot: dot.value };
      ['goal', 'verbosity', 'group'].forEach(function (name) {
        var f = form.elements[name];
        if (f && f.value.trim()) body[name] = f.value.trim();
      });
      var inputs = form.elements.inputs, bad = '';
      if (inputs && inputs.value.trim()) {
        body.inputs = {};
        inputs.value.split('\n').forEach(function (line) {
          line = line.trim();
          if (!line) return;
          var eq = line.indexOf('=');
          if (eq <= 0) { bad = bad || line; return; }
          body.inputs[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
        });
      }
      if (bad) {
        showResult('error', 'Each input is a line key=value; this one is not: ' + bad);
        inputs.focus();
        return;
      }
      var missing = null;
      inputBox.querySelectorAll('input[data-input]').forEach(function (f) {
        var v = f.value.trim();
        if (!v) { missing = missing || f; return; }
        body.inputs = body.inputs || {};
        body.inputs[f.dataset.input] = v;
      });
      if (missing) {
        showResult('error', 'The pipeline needs input ' + missing.dataset.input + ': fill it in.');
        missing.focus();
        return;
      }
      var submit = form.querySelector('button[type=submit]');
      submit.disabled = true;
      showResult('', 'Starting…');
      postJSON('/pipelines', body).then(function (r) {
        submit.disabled = false;
        if (!r.ok) {
          showRefusal(r);
          return;
        }
        var box = showResult('ok', 'Started run ');
        var p = box.firstChild;
        p.appendChild(el('a', { href: '/runs/' + encodeURIComponent(r.data.id) }, r.data.id));
        p.appendChild(document.createTextNode('.'));
        var warnings = r.data.diagnostics || [];
        if (warnings.length) {
          p.appendChild(document.createTextNode(' It has ' + warnings.length + ' warning' + (warnings.length > 1 ? 's' : '') + ':'));
          box.appendChild(diagnostics(warnings));
        }
        refreshRuns(r.data.id);
      }).catch(function (err) {
        submit.disabled = false;
        showResult('error', 'Could not reach the host: ' + err.message);
      });
    });
  }

  // ---- run page ----
  function setupRun(runID) {
    var base = '/pipelines/' + encodeURIComponent(runID);
    var body = document.body;
    var graphTimer = null;
    var selectedNode = null;

    function refreshGraph() {
      clearTimeout(graphTimer);
      graphTimer = setTimeout(function () {
        fetch(base + '/graph', { credentials: 'same-origin' })
          .then(function (res) { return res.ok ? res.text() : null; })
          .then(function (svg) {
            if (!svg) return;
            var doc = new DOMParser().parseFromString(svg, 'image/svg+xml');
            var root = doc.documentElement;
            if (!root || root.nodeName !== 'svg') return;
            var g = $('#graph');
            g.replaceChildren(document.importNode(root, true));
            markNodes();
            markSelected();
          }).catch(function () {});
      }, 150);
    }

    function refreshRun() {
      getJSON(base).then(function (run) {
        var st = $('#run-status');
        st.textContent = run.status;
        st.className = 'badge ' + run.status;
        $('#run-duration').textContent = duration(run.duration_ms);
        $('#run-cost').textContent = money(run.usage && run.usage.cost_usd);
        $('#run-current').textContent = run.current_label || run.current_node || '—';
        var reason = $('#run-reason');
        reason.textContent = run.failure_reason || '';
        reason.hidden = !run.failure_reason;
        var finished = run.finished;
        body.dataset.finished = String(finished);
        if (run.started_at) body.dataset.started = run.started_at;
        body.dataset.status = run.status;
        if (finished) {
          var c = $('#cancel');
          if (c) c.remove();
        }
      }).catch(function () {});
    }

    // The timeline: the server draws it; it is fetched again as the run goes on.
    var timelineTimer = null;
    function refreshTimeline() {
      clearTimeout(timelineTimer);
      timelineTimer = setTimeout(function () {
        fetch('/runs/' + encodeURIComponent(runID) + '/timeline', { headers: { 'Accept': 'text/html' }, credentials: 'same-origin' })
          .then(function (res) { return res.ok ? res.text() : null; })
          .then(function (html) {
            if (html === null) return;
            var doc = new DOMParser().parseFromString('<div>' + html + '</div>', 'text/html');
            var box = $('#timeline-body');
            box.replaceChildren.apply(box, Array.prototype.map.call(doc.body.firstChild.childNodes, function (n) { return document.importNode(n, true); }));
            $('#timeline').hidden = !box.querySelector('ol.gantt');
          }).catch(function () {});
      }, 300);
    }
    $('#timeline').addEventListener('click', function (ev) {
      var b = ev.target.closest('button.gantt-name');
      if (b) showNode(b.dataset.node);
    });
    // Running bars grow while the run is live.
    setInterval(function () {
      if (body.dataset.finished !== 'true' && !document.hidden && $('#timeline ol.gantt')) refreshTimeline();
    }, 5000);

    // Questions: rebuilt from the API whenever a gate opens or closes.
    function renderQuestions(list) {
      var box = $('#questions');
      box.replaceChildren();
      list.forEach(function (q) {
        var div = el('div', { 'class': 'question', 'data-gate': q.gate_id, 'data-nonce': q.nonce });
        div.appendChild(el('p', { 'class': 'q-text' }, q.asked));
        var choices = el('div', { 'class': 'choices' });
        var takesText = q.choices.length === 0;
        // A button names its option by position: two options may share a key.
        q.choices.forEach(function (o, i) {
          if (o.freeform) { takesText = true; return; }
          var b = el('button', { type: 'button', 'class': 'choice', 'data-option': String(i + 1) }, optionText(o));
          choices.appendChild(b);
        });
        div.appendChild(choices);
        if (takesText) {
          var f = el('form', { 'class': 'freeform' });
          f.appendChild(el('input', { name: 'text', type: 'text', placeholder: 'Type an answer', 'aria-label': 'Answer' }));
          f.appendChild(el('button', { type: 'submit' }, 'Send'));
          div.appendChild(f);
        }
        box.appendChild(div);
      });
    }

    function refreshQuestions() {
      getJSON(base + '/questions').then(function (d) { renderQuestions(d.questions); }).catch(function () {});
    }

    function answer(q, payload) {
      payload.nonce = q.dataset.nonce;
      q.querySelectorAll('button').forEach(function (b) { b.disabled = true; });
      postJSON(base + '/questions/' + encodeURIComponent(q.dataset.gate) + '/answer', payload).then(function (r) {
        if (r.ok) {
          notice('Answered: ' + (r.data.answer || '') + ' (as ' + r.data.answered_by + ')', 'ok');
          q.remove();
        } else {
          notice(r.data.error || ('The answer was refused (' + r.status + ')'), 'error');
          if (r.status === 409) q.remove();
          else q.querySelectorAll('button').forEach(function (b) { b.disabled = false; });
        }
      }).catch(function (err) {
        notice('Could not send the answer: ' + err.message, 'error');
        q.querySelectorAll('button').forEach(function (b) { b.disabled = false; });
      });
    }

    $('#questions').addEventListener('click', function (ev) {
      var b = ev.target.closest('button.choice');
      if (!b) return;
      answer(b.closest('.question'), { option: Number(b.dataset.option) });
    });
    $('#questions').addEventListener('submit', function (ev) {
      ev.preventDefault();
      var f = ev.target;
      var text = f.elements.text.value.trim();
      if (text) answer(f.closest('.question'), { text: text });
    });

    var cancel = $('#cancel');
    if (cancel) {
      cancel.addEventListener('click', function () {
        if (!confirm('Cancel this run? It stops at its next safe point.')) return;
        cancel.disabled = true;
        postJSON(base + '/cancel').then(function (r) {
          notice(r.ok ? 'Cancelling…' : (r.data.error || 'Cancel refused'), r.ok ? 'ok' : 'error');
          if (!r.ok) cancel.disabled = false;
        });
      });
    }

    // Node details on click.
    function markSelected() {
      document.querySelectorAll('#graph g.node.selected').forEach(function (n) { n.classList.remove('selected'); });
      if (!selectedNode) return;
      var n = document.getElementById('node-' + selectedNode);
      if (n) n.classList.add('selected');
    }

    function showNode(id) {
      selectedNode = id;
      markSelected();
      getJSON(base + '/nodes/' + encodeURIComponent(id)).then(function (n) {
        var panel = $('#node');
        $('#node-id').textContent = n.label && n.label !== n.id ? n.label + ' (' + n.id + ')' : n.id;
        var st = $('#node-state');
        st.textContent = n.state + (n.visits > 1 ? ' · ' + n.visits + ' visits' : '');
        st.className = 'badge ' + n.state;
        var last = n.last_visit, facts = [];
        if (last) {
          if (last.walker) facts.push('team walk: ' + last.walker);
          else if (last.persona) facts.push('as ' + last.persona);
          if (last.masks && last.masks.length) facts.push('wearing ' + last.masks.join(', '));
          facts.push('started ' + last.started_at.slice(11, 19));
          if (last.finished_at) facts.push('took ' + duration(last.duration_ms || 1));
          else if (n.state === 'running' || n.state === 'retrying') facts.push('running for ' + duration(Date.now() - Date.parse(last.started_at)));
          if (last.attempt > 1 || n.state === 'retrying') facts.push('attempt ' + last.attempt + (last.max_attempts ? ' of ' + last.max_attempts : ''));
          if (last.status) facts.push(last.status);
          if (last.usage && last.usage.cost_usd) facts.push(money(last.usage.cost_usd));
        }
        $('#node-timing').textContent = facts.length ? facts.join(' · ') : 'not run yet';
        var msg = $('#node-message');
        msg.textContent = last && last.message ? last.message : '';
        msg.hidden = !msg.textContent;
        msg.className = 'node-message' + (n.state === 'fail' || n.state === 'retrying' ? ' error' : '');
        var files = $('#node-files');
        files.replaceChildren();
        var names = ['prompt.md', 'response.md', 'status.json', 'output.json'];
        var any = false;
        names.forEach(function (name) {
          var f = n.files[name];
          if (!f) return;
          any = true;
          var d = el('details', { open: '' });
          var s = el('summary', {}, name + (f.truncated ? ' (truncated)' : ''));
          d.appendChild(s);
          d.appendChild(el('pre', { 'class': 'file' }, (name === 'status.json' || name === 'output.json') && !f.truncated ? prettyJSON(f.content) : f.content));
          var a = el('a', { href: n.raw[name] }, 'raw');
          d.appendChild(a);
          files.appendChild(d);
        });
        if (!any) files.appendChild(el('p', { 'class': 'muted' }, n.prompt_attr ? 'Not run yet. Prompt: ' + n.prompt_attr : 'No files for this node (yet).'));
        if (n.changes) {
          var cd = el('details', { open: '', 'class': 'node-changes' });
          cd.appendChild(el('summary', {}, 'Changes' + (n.changes.visit > 1 ? ' (visit ' + n.changes.visit + ')' : '') + ' \u00b7 ' + changesSummary(n.changes.summary)));
          var cbox = el('div', { 'class': 'changes' }, 'Loading\u2026');
          cd.appendChild(cbox);
          files.appendChild(cd);
          loadNodeChanges(cbox, n.changes.link, '');
        }
        panel.hidden = false;
        if (window.matchMedia('(max-width: 800px)').matches) panel.scrollIntoView({ behavior: 'smooth' });
      }).catch(function (err) { notice('Could not load node ' + id + ': ' + err.message, 'error'); });
    }

    // A node's changes; earlier visits of a node visited again are a click away.
    function loadNodeChanges(box, link, visit) {
      getJSON(link + (visit ? '?visit=' + visit : '')).then(function (set) {
        renderChanges(box, set);
        if (set.earlier_visits && set.earlier_visits.length) {
          var nav = el('p', { 'class': 'visits' }, 'Visits: ');
          set.earlier_visits.concat(['latest']).forEach(function (v) {
            var current = v === 'latest' ? !visit : String(v) === String(visit);
            var b = el('button', { type: 'button', 'class': 'link' + (current ? ' current' : '') }, String(v));
            b.disabled = current;
            b.addEventListener('click', function () { loadNodeChanges(box, link, v === 'latest' ? '' : v); });
            nav.appendChild(b);
            nav.appendChild(document.createTextNode(' '));
          });
          box.insertBefore(nav, box.firstChild);
        }
      }).catch(function (err) { box.textContent = 'Could not load the changes: ' + err.message; });
    }

    // The run's changes since it started: the summary always, the diffs
    // when opened (the gate prompt in chat links to #changes).
    var runChanges = $('#run-changes');
    var scrollToChanges = location.hash === '#changes';
    function refreshRunChanges() {
      var full = runChanges.open;
      getJSON(base + '/changes' + (full ? '' : '?diff=0')).then(function (set) {
        $('#changes').hidden = false;
        $('#run-changes-summary').textContent = '\u00b7 ' + changesSummary(set.summary);
        showBranch(set.branch);
        if (!full) return;
        renderChanges($('#run-changes-body'), set);
        if (scrollToChanges) {
          scrollToChanges = false;
          $('#changes').scrollIntoView();
        }
      }).catch(function () {});
    }
    // The run's git branch: its base, its commits, and what became of it.
    function showBranch(b) {
      var p = $('#run-branch');
      if (!b) return;
      p.textContent = '';
      p.appendChild(document.createTextNode('Branch '));
      p.appendChild(el('code', {}, b.name));
      p.appendChild(document.createTextNode(' \u2014 ' + b.commits + ' commit(s) since ' + b.base.slice(0, 12) +
        (b.base_branch ? ' (' + b.base_branch + ')' : '')));
      if (b.pull_request && /^https?:\/\//.test(b.pull_request)) {
        p.appendChild(document.createTextNode(' \u00b7 '));
        p.appendChild(el('a', { href: b.pull_request, rel: 'noopener noreferrer' }, 'pull request'));
      } else if (b.pushed) {
        p.appendChild(document.createTextNode(' \u00b7 pushed'));
      }
      if (b.fast_forwarded) p.appendChild(document.createTextNode(' \u00b7 now in the group\u2019s folder'));
      (b.problems || []).forEach(function (msg) { p.appendChild(document.createTextNode(' \u00b7 not done: ' + msg)); });
      p.hidden = false;
    }
    runChanges.addEventListener('toggle', function () { if (runChanges.open) refreshRunChanges(); });
    if (scrollToChanges) runChanges.open = true; // its toggle loads it
    else refreshRunChanges();
    window.addEventListener('hashchange', function () {
      if (location.hash !== '#changes') return;
      scrollToChanges = true;
      if (runChanges.open) refreshRunChanges();
      else runChanges.open = true;
    });

    $('#graph').addEventListener('click', function (ev) {
      var g = ev.target.closest('g.node');
      if (!g || !g.id || g.id.indexOf('node-') !== 0) return;
      showNode(g.id.slice(5));
    });

    // Live events.
    var log = $('#log');
    function addLine(e) {
      var li = el('li', { 'data-seq': String(e.seq), 'class': 'ev ' + e.type + ' v-' + (e.verbosity || 'verbose') });
      li.appendChild(el('time', {}, (e.time || '').slice(11, 19)));
      li.appendChild(document.createTextNode(' '));
      li.appendChild(el('span', { 'class': 'kind' }, e.name));
      li.appendChild(document.createTextNode(' '));
      li.appendChild(el('span', { 'class': 'text' }, e.text));
      var atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
      log.appendChild(li);
      if (atBottom) log.scrollTop = log.scrollHeight;
      if (e.type === 'PipelineInterrupted' || e.type === 'PipelineResumed') pinStop(e);
    }

    // Where the host stopped and the run resumed stays in view above the
    // log, however far the log has scrolled on; a click shows the line.
    var stops = $('#stops');
    function pinStop(e) {
      var li = el('li', { 'class': 'stop ' + (e.type === 'PipelineResumed' ? 'resumed' : 'interrupted'), 'data-seq': String(e.seq) });
      li.appendChild(el('time', {}, (e.time || '').slice(11, 19)));
      li.appendChild(document.createTextNode(' '));
      li.appendChild(el('span', {}, e.text));
      stops.appendChild(li);
      stops.hidden = false;
    }
    stops.addEventListener('click', function (ev) {
      var li = ev.target.closest('li[data-seq]');
      var line = li && log.querySelector('li[data-seq="' + li.dataset.seq + '"]');
      if (!line) return;
      log.scrollTop = line.offsetTop - log.offsetTop - 8;
      line.classList.add('flash');
      setTimeout(function () { line.classList.remove('flash'); }, 1500);
    });
    log.scrollTop = log.scrollHeight;

    // Every event, or only those the run's thread would show (standard).
    var all = $('#all-events');
    all.checked = localStorage.getItem('nanohost.allEvents') === '1';
    log.classList.toggle('all', all.checked);
    all.addEventListener('change', function () {
      localStorage.setItem('nanohost.allEvents', all.checked ? '1' : '0');
      log.classList.toggle('all', all.checked);
      log.scrollTop = log.scrollHeight;
    });

    // The duration ticks while the run is live.
    setInterval(function () {
      if (body.dataset.finished === 'true' || !body.dataset.started) return;
      var d = $('#run-duration');
      if (d) d.textContent = duration(Date.now() - Date.parse(body.dataset.started));
    }, 1000);

    if (body.dataset.finished === 'true') return;
    var after = body.dataset.lastSeq || '0';
    var src = new EventSource(base + '/events?after=' + encodeURIComponent(after));
    src.onmessage = function (m) {
      var e;
      try { e = JSON.parse(m.data); } catch (_) { return; }
      addLine(e);
      body.dataset.lastSeq = String(e.seq);
      switch (e.type) {
        case 'StageStarted': case 'StageCompleted': case 'StageFailed': case 'StageRetrying':
        case 'Decision': case 'PipelineCompleted': case 'PipelineFailed': case 'PipelineResumed':
          refreshGraph();
          refreshRun();
          refreshTimeline();
          break;
        case 'WorkspaceChanged':
          refreshRunChanges();
          break;
        case 'InterviewStarted': case 'InterviewCompleted': case 'InterviewTimeout':
          refreshQuestions();
          refreshRun();
          refreshGraph();
          refreshTimeline();
          break;
      }
      if (selectedNode && e.node_id === selectedNode && /^(Stage|WorkspaceChanged)/.test(e.type)) {
        showNode(selectedNode);
      }
    };
    src.addEventListener('end', function () {
      src.close();
      refreshTimeline();
      refreshGraph();
      refreshRun();
      refreshQuestions();
      refreshRunChanges();
    });
  }

  document.addEventListener('DOMContentLoaded', function () {
    markNodes();
    setupRunsList();
    setupStartForm();
    if (document.body.dataset.run) setupRun(document.body.dataset.run);
  });
})();
