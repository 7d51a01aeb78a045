// wakeful inspector, one session: follow its log over SSE, pair tool calls with their results
// as they arrive, chart tokens and cost per turn, send steers, queued prompts, interrupts, and
// decide on calls waiting for approval.
(function () {
  "use strict";
  var wk = window.wakeful, el = wk.el;
  var body = document.body;
  var sid = body.dataset.session;
  if (!sid) return;

  var lastSeq = Number(body.dataset.lastSeq || 0);
  var keyArgs = (body.dataset.keyArgs || "").split(" ");
  var messages = document.getElementById("messages");
  var live = document.getElementById("live");
  var liveText = document.getElementById("live-text");
  var conn = document.getElementById("conn");
  var statusEl = document.getElementById("status");
  var logList = document.getElementById("log");
  var composeStatus = document.getElementById("compose-status");

  function fold(kind, title, text, error) {
    var d = el("details", "fold fold-" + kind + (error ? " error" : ""));
    d.appendChild(el("summary", "", title));
    d.appendChild(el("pre", "", text));
    return d;
  }

  function resultText(output) {
    if (typeof output === "string") return output;
    return (output || []).map(function (p) { return p.text || "[" + (p.type || "part") + "]"; }).join("\n");
  }

  function preview(text) {
    var first = text.split("\n").filter(function (l) { return l.trim(); })[0] || "";
    return first.length > 80 ? first.slice(0, 80) + "…" : first;
  }

  function keyArg(input) {
    for (var i = 0; i < keyArgs.length; i++) {
      var v = input && input[keyArgs[i]];
      if (typeof v === "string" && v.trim()) {
        var line = v.split(/\s+/).filter(Boolean).join(" ");
        return line.length > 100 ? line.slice(0, 100) + "…" : line;
      }
    }
    return "";
  }

  // A tool call, shown once: its name and key argument, later its result (see `settle`).
  function toolCard(b) {
    var d = el("details", "fold tool pending");
    d.dataset.call = b.id;
    var sum = el("summary");
    sum.appendChild(el("span", "tool-name", "→ " + b.name));
    var arg = keyArg(b.input);
    if (arg) { sum.appendChild(document.createTextNode(" ")); sum.appendChild(el("code", "tool-arg", arg)); }
    sum.appendChild(document.createTextNode(" "));
    sum.appendChild(el("span", "tool-state", "running…"));
    d.appendChild(sum);
    var inp = b.input || {};
    if (b.name === "edit_file" && typeof inp.old === "string" && typeof inp.new === "string") {
      var diff = el("div", "diff");
      diff.dataset.path = inp.path || "";
      diff.dataset.old = inp.old;
      diff.dataset.new = inp.new;
      d.appendChild(diff);
      d.open = true;
    }
    var tin = el("div", "tool-in");
    tin.appendChild(el("div", "label", "input"));
    tin.appendChild(el("pre", "", JSON.stringify(inp, null, 2)));
    d.appendChild(tin);
    var tout = el("div", "tool-out");
    tout.appendChild(el("div", "label", "result"));
    tout.appendChild(el("pre", "", ""));
    d.appendChild(tout);
    return d;
  }

  function findCall(callId) {
    var found = null;
    messages.querySelectorAll(".tool[data-call]").forEach(function (c) { if (c.dataset.call === callId) found = c; });
    return found;
  }

  function settle(card, b) {
    var text = resultText(b.output);
    card.classList.remove("pending");
    if (b.is_error) card.classList.add("error");
    card.querySelector(".tool-state").textContent = (b.is_error ? "✗ " : "✓ ") + preview(text);
    card.querySelector(".tool-out pre").textContent = text;
    var kept = b.metadata && b.metadata.full_output;  // cut for the model: link the whole output
    if (kept && typeof kept.ref === "string" && !card.querySelector(".whole-output")) {
      var a = el("a", "whole-output", "the whole output (" + kept.bytes + " bytes; the model was given it cut)");
      a.href = wk.base + "/sessions/" + sid + "/media/" + kept.ref;
      a.target = "_blank";
      a.rel = "noopener";
      card.querySelector(".tool-out").appendChild(a);
    }
  }

  // A message's parts; results whose call is shown go to that call. Null: nothing left to show.
  function renderMessage(seq, m) {
    // wakeful's note on resuming a crashed turn is sent as a user message but nobody wrote it
    // (`speaker` in messages/_plain.py, the rule this repeats).
    var who = m.metadata && m.metadata.recovery_of ? "recovery" : m.role;
    var art = el("article", "msg role-" + who);
    art.dataset.seq = seq;
    art.dataset.id = m.id || "";
    var head = el("div", "who", who + " ");
    head.appendChild(el("span", "seq", "#" + seq));
    if (m.metadata && m.metadata.truncated) {
      var cut = el("span", "truncated", "truncated");
      cut.title = "The reply stopped at the output limit";
      head.appendChild(document.createTextNode(" "));
      head.appendChild(cut);
    }
    art.appendChild(head);
    var shown = 0;
    (m.blocks || []).forEach(function (b) {
      if (b.type === "tool_result") {
        var card = findCall(b.call_id);
        if (card) { settle(card, b); return; }
        art.appendChild(fold("tool_result", b.is_error ? "✗ tool result (error)" : "← tool result", resultText(b.output), b.is_error));
      } else if (b.type === "text") art.appendChild(el("div", "text", b.text));
      else if (b.type === "tool_call") art.appendChild(toolCard(b));
      else if (b.type === "image") {
        var fig = el("figure", "media");
        var img = document.createElement("img");
        img.src = b.data ? "data:" + b.media_type + ";base64," + b.data : wk.base + "/sessions/" + sid + "/media/" + b.ref;
        img.alt = b.name || b.media_type;
        fig.appendChild(img);
        art.appendChild(fig);
      } else if (b.type === "thinking") art.appendChild(fold("thinking", "thinking", b.text));
      else if (b.type === "compact_summary") art.appendChild(fold("summary", "compaction summary", b.summary));
      else art.appendChild(fold("other", b.type, JSON.stringify(b, null, 2)));
      shown++;
    });
    wk.diffs(art);
    return shown ? art : null;
  }

  // The Log box: the last LOG_KEPT events, the ones before the page's `last_seq` included
  // (the stream starts that far back), then each new one as it arrives.
  var LOG_KEPT = 200, logSeq = 0;
  function logLine(ev) {
    if (ev.seq <= logSeq) return;
    logSeq = ev.seq;
    // who admitted, approved, interrupted or rewound (docs/access.md, "Who did what")
    var by = ev.data && ev.data.actor ? " by " + ev.data.actor : "";
    var li = el("li", "", "#" + ev.seq + " " + ev.type + by);
    li.dataset.seq = ev.seq;
    logList.appendChild(li);
    while (logList.children.length > LOG_KEPT) logList.removeChild(logList.firstChild);
  }

  function setStatus(text) {
    statusEl.textContent = text;
    statusEl.className = "status status-" + text;
  }

  function removeRow(tableId, attr, value) {
    document.querySelectorAll("#" + tableId + " tr[data-" + attr + "]").forEach(function (r) {
      if (r.dataset[attr] === value) r.remove();
    });
  }

  // The page was rendered from reads made after its `last_seq`, so the log replays a few events
  // it already shows: messages are placed by seq, receipts and inputs are known by their ids.
  function present(selector, attr, value) {
    return Array.prototype.some.call(document.querySelectorAll(selector), function (n) { return n.dataset[attr] === value; });
  }

  function addPending(d) {
    if (present("#pending tr[data-input]", "input", d.input_id)) return;
    var tr = el("tr");
    tr.dataset.input = d.input_id;
    tr.appendChild(el("td", "", d.input_id));
    tr.appendChild(el("td", "", d.kind));
    tr.appendChild(el("td", "", d.delivery));
    tr.appendChild(el("td", "", (d.payload && d.payload.text) || ""));
    document.querySelector("#pending tbody").appendChild(tr);
  }

  // A cost, or "unknown" when a request's model had no known price (never shown as zero).
  function costText(usd) { return usd == null ? "unknown" : "$" + usd.toFixed(4); }

  // -- tokens and cost per turn: an SVG bar chart drawn from the turns table's rows -----------

  var SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, text) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function chart() {
    var box = document.getElementById("turn-chart");
    var rows = Array.prototype.slice.call(document.querySelectorAll("#turns tbody tr[data-turn]"));
    box.textContent = "";
    document.getElementById("turn-chart-box").hidden = rows.length === 0;
    if (!rows.length) return;
    var turns = rows.map(function (r) {
      return { id: r.dataset.turn, tin: Number(r.dataset.in), tout: Number(r.dataset.out), cost: r.dataset.cost === "" ? null : Number(r.dataset.cost) };
    });
    var W = box.clientWidth || 480, H = 150, top = 30, bottom = 16, left = 4;
    var most = Math.max.apply(null, turns.map(function (t) { return t.tin + t.tout; })) || 1;
    var slot = (W - left) / turns.length, bar = Math.max(2, Math.min(48, slot * 0.7));
    var scale = (H - top - bottom) / most;
    box.appendChild(svg("text", { x: W - 2, y: 11, "class": "axis" }, "max " + most.toLocaleString() + " tokens"));
    turns.forEach(function (t, i) {
      var x = left + i * slot + (slot - bar) / 2, hin = t.tin * scale, hout = t.tout * scale;
      var g = svg("g", { "class": "turn-bar" });
      g.dataset.turn = t.id;
      g.appendChild(svg("title", {}, "turn " + (i + 1) + " · " + t.tin.toLocaleString() + " in / " +
                                      t.tout.toLocaleString() + " out · " + costText(t.cost)));
      g.appendChild(svg("rect", { x: x, y: H - bottom - hin, width: bar, height: Math.max(hin, 0), "class": "bar-in" }));
      g.appendChild(svg("rect", { x: x, y: H - bottom - hin - hout, width: bar, height: Math.max(hout, 0), "class": "bar-out" }));
      if (bar >= 30) g.appendChild(svg("text", { x: x + bar / 2, y: H - bottom - hin - hout - 3, "class": "cost" }, costText(t.cost)));
      if (slot >= 14 || i % Math.ceil(14 / slot) === 0) g.appendChild(svg("text", { x: x + bar / 2, y: H - 3, "class": "turn-no" }, String(i + 1)));
      box.appendChild(g);
    });
  }

  function num(n) { return Number(n).toLocaleString("en-US"); }

  // One turn's row (and, when it failed, a full-width row with its error), as the page renders.
  function turnRows(t, no) {
    var tr = el("tr", t.reverted ? "reverted" : "");
    tr.dataset.turn = t.id;
    tr.dataset.no = no;
    tr.dataset["in"] = t.tokens_in;
    tr.dataset.out = t.tokens_out;
    tr.dataset.cost = t.cost_usd == null ? "" : t.cost_usd;
    var cellNo = el("td", "no", String(no));
    cellNo.title = t.id;
    tr.appendChild(cellNo);
    var outcome = t.outcome || t.status;
    var cell = el("td", "outcome outcome-" + outcome, outcome);
    if (t.truncated) {
      cell.appendChild(document.createTextNode(" "));
      cell.appendChild(el("span", "truncated", "truncated"));
    }
    if (t.reverted) {
      cell.appendChild(document.createTextNode(" "));
      cell.appendChild(el("span", "tag reverted-tag", "reverted"));
    }
    tr.appendChild(cell);
    tr.appendChild(el("td", "", String(t.steps)));
    tr.appendChild(el("td", "num", num(t.tokens_in) + " / " + num(t.tokens_out)));
    var hit = t.cache_hit_ratio == null ? "" : " · " + Math.round(t.cache_hit_ratio * 100) + "%";
    var cached = t.tokens_cache_read || t.tokens_cache_write;  // "—": no prompt cache in use
    tr.appendChild(el("td", "num col-cache", cached ? num(t.tokens_cache_read) + " / " + num(t.tokens_cache_write) + hit : "—"));
    tr.appendChild(el("td", "num", costText(t.cost_usd)));
    var act = el("td", "act");
    if (!t.reverted) {
      var button = el("button", "rewind", "rewind");
      button.type = "button";
      button.dataset.turn = t.id;
      button.dataset.no = no;
      button.title = "revert the session to just before this turn";
      act.appendChild(button);
    }
    tr.appendChild(act);
    if (!t.error) return [tr];
    var err = el("tr", "turn-error");
    err.dataset.errorOf = t.id;
    var td = el("td");
    td.colSpan = 7;
    td.appendChild(el("span", "error", t.error.length > 400 ? t.error.slice(0, 397) + "..." : t.error));
    err.appendChild(td);
    return [tr, err];
  }

  function refreshTurns() {
    wk.api("GET", "/sessions/" + sid + "/turns").then(function (res) {
      if (!res.ok) return;
      var tbody = document.querySelector("#turns tbody");
      tbody.textContent = "";
      res.data.turns.forEach(function (t, i) {
        noteTurn(t.id);
        turnRows(t, i + 1).forEach(function (r) { tbody.appendChild(r); });
      });
      chart();
    });
  }

  // Turn numbers by id, for receipts that arrive before the turns table is fetched again.
  var turnIds = Array.prototype.map.call(document.querySelectorAll("#turns tbody tr[data-turn]"),
                                         function (r) { return r.dataset.turn; });
  function noteTurn(id) { if (id && turnIds.indexOf(id) < 0) turnIds.push(id); }
  function turnLabel(id) {
    var i = turnIds.indexOf(id);
    return i < 0 ? "no turn" : "turn " + (i + 1);
  }

  // The artifacts panel, fetched again when one is recorded (by a tool call the page approved,
  // by the API) so it never goes stale.
  function refreshArtifacts() {
    wk.api("GET", "/sessions/" + sid + "/artifacts?limit=200").then(function (res) {
      if (!res.ok) return;
      var tbody = document.querySelector("#artifacts tbody");
      tbody.textContent = "";
      res.data.artifacts.forEach(function (a) {
        var tr = el("tr");
        tr.dataset.kind = a.kind;
        tr.appendChild(el("td", "", a.kind));
        var cell = el("td");
        if (/^https?:\/\//.test(a.uri)) {
          var link = el("a", "", a.label);
          link.href = a.uri;
          link.rel = "noopener noreferrer";
          cell.appendChild(link);
        } else {
          var span = el("span", "", a.label);
          span.title = a.uri;
          cell.appendChild(span);
        }
        tr.appendChild(cell);
        var when = el("td"), time = el("time", "", wk.localTime(a.updated_ms));
        time.dataset.ms = a.updated_ms;
        when.appendChild(time);
        tr.appendChild(when);
        tbody.appendChild(tr);
      });
      if (!res.data.artifacts.length) {
        var empty = el("tr", "empty"), td = el("td", "", "No artifacts yet.");
        td.colSpan = 3;
        empty.appendChild(td);
        tbody.appendChild(empty);
      }
    });
  }

  // A live receipt, like the page's own: one timeline entry saying what changed since the
  // request before it (sections by digest, new history messages); `receipt_changes` in
  // _views.py does the same for the receipts the page was rendered with.
  function addReceipt(d) {
    if (present("#receipts details[data-receipt]", "receipt", d.receipt_id)) return;
    var box = document.getElementById("receipts");
    var empty = box.querySelector(".empty");
    if (empty) empty.remove();
    var all = box.querySelectorAll("details.receipt");
    var last = all.length ? all[all.length - 1] : null;
    var prev = last ? JSON.parse(last.dataset.sections || "{}") : null;
    var seen = last ? JSON.parse(last.dataset.messages || "[]") : [];
    var now = {};
    (d.sections || []).forEach(function (s) { now[s[0]] = s[2]; });
    var ids = d.message_ids || [];
    if (d.base) {  // recorded against an earlier receipt: its first base[1] messages, then these
      var base = box.querySelector('details.receipt[data-receipt="' + d.base[0] + '"]');
      if (base) ids = JSON.parse(base.dataset.messages || "[]").slice(0, d.base[1]).concat(ids);
    }
    var det = el("details", "fold receipt");
    det.dataset.receipt = d.receipt_id;
    det.dataset.sections = JSON.stringify(now);
    det.dataset.messages = JSON.stringify(ids);
    var sum = el("summary");
    sum.appendChild(el("span", "turn-no", turnLabel(d.turn_id)));
    var purpose = d.purpose && d.purpose !== "step" ? " · " + d.purpose : "";
    sum.appendChild(document.createTextNode(" · step " + d.step + " · attempt " + d.attempt + purpose + " · "));
    sum.appendChild(el("code", "", d.request_digest.slice(0, 12)));
    var shown = d.sections || [];
    var text;
    if (prev === null) {
      text = "first request: " + shown.length + " sections, " + ids.length + " messages";
    } else {
      var added = Object.keys(now).filter(function (k) { return !(k in prev); });
      var changed = Object.keys(now).filter(function (k) { return k in prev && prev[k] !== now[k]; });
      var removed = Object.keys(prev).filter(function (k) { return !(k in now); });
      var fresh = ids.filter(function (m) { return seen.indexOf(m) < 0; }).length;
      text = "+" + fresh + " messages";
      if (changed.length) text += " · changed " + changed.join(", ");
      if (added.length) text += " · added " + added.join(", ");
      if (removed.length) text += " · removed " + removed.join(", ");
      if (!(changed.length || added.length || removed.length)) text += " · sections unchanged";
      shown = shown.filter(function (s) { return added.indexOf(s[0]) >= 0 || changed.indexOf(s[0]) >= 0; });
    }
    sum.appendChild(document.createTextNode(" · "));
    sum.appendChild(el("span", "change", text));
    det.appendChild(sum);
    if (shown.length) {
      var wrap = el("div", "scroll"), table = el("table", "small");
      shown.forEach(function (s) {
        var tr = el("tr");
        tr.appendChild(el("td", "", s[0]));
        tr.appendChild(el("td", "", s[1]));
        tr.appendChild(el("td", "", s[2].slice(0, 12)));
        table.appendChild(tr);
      });
      wrap.appendChild(table);
      det.appendChild(wrap);
    }
    var li = el("li");
    li.appendChild(det);
    box.appendChild(li);
  }

  // Messages go in seq order, also when one arrives late (a delivered input is fetched).
  function place(node) {
    if (!node) return;
    var seq = Number(node.dataset.seq);
    var kids = Array.prototype.slice.call(messages.children);
    if (kids.some(function (m) { return Number(m.dataset.seq) === seq; })) return;
    var after = kids.find(function (m) { return Number(m.dataset.seq) > seq; });
    messages.insertBefore(node, after || null);
  }

  // A delivered input names its message; the transcript holds it at the event's seq.
  function fetchMessage(seq) {
    var path = "/sessions/" + sid + "/messages?after_seq=" + (seq - 1) + (body.dataset.sensitive ? "&sensitive=true" : "");
    wk.api("GET", path).then(function (res) {
      if (!res.ok) return;
      res.data.messages.forEach(function (m) { if (m.seq === seq) place(renderMessage(m.seq, m.message)); });
    });
  }

  function onDurable(ev) {
    logLine(ev);
    if (ev.seq <= lastSeq) return;  // already on the page (the log box shows it all the same)
    lastSeq = ev.seq;
    var d = ev.data;
    if (ev.type === "message.added") {
      if (d.message.role === "assistant") { live.hidden = true; liveText.textContent = ""; }
      place(renderMessage(ev.seq, d.message));
    } else if (ev.type === "inbox.enqueued") addPending(d);
    else if (ev.type === "receipt.recorded") addReceipt(d);
    else if (ev.type === "inbox.delivered" || ev.type === "inbox.rejected") {
      removeRow("pending", "input", d.input_id);
      if (d.message) place(renderMessage(ev.seq, d.message));
      else if (d.message_id) fetchMessage(ev.seq);
    } else if (ev.type === "turn.started") { noteTurn(d.turn_id); setStatus("running"); refreshTurns(); }
    else if (ev.type === "artifact.recorded") refreshArtifacts();
    else if (ev.type === "turn.ended") {
      setStatus(d.error_kind === "awaiting_approval" ? "awaiting_approval" : d.outcome === "completed" ? "idle" : d.outcome);
      refreshTurns();
      refreshApprovals();
    } else if (ev.type === "approval.decided") refreshApprovals();
    else if (ev.type === "usage.recorded") {
      var inEl = document.getElementById("usage-in"), outEl = document.getElementById("usage-out");
      inEl.textContent = String(Number(inEl.textContent) + (d.input_tokens || 0));
      outEl.textContent = String(Number(outEl.textContent) + (d.output_tokens || 0));
      refreshTurns();
    }
  }

  // Calls waiting for a decision: each with its command or diff and allow / always / deny.
  var approvals = document.getElementById("approvals");
  var approvalList = document.getElementById("approval-list");

  function approvalCard(a) {
    var card = el("div", "approval");
    card.dataset.call = a.call_id;
    var head = el("div", "approval-head");
    head.appendChild(el("span", "tool-name", a.name));
    head.appendChild(document.createTextNode(" "));
    head.appendChild(el("code", "hint", a.call_id));
    card.appendChild(head);
    var pre = el("pre", "diff-body approval-preview");
    a.preview.split("\n").forEach(function (line) {
      var kind = /^\+(?!\+\+)/.test(line) ? "add" : /^-(?!--)/.test(line) ? "del" : "ctx";
      pre.appendChild(el("span", "d-" + kind, line));
    });
    card.appendChild(pre);
    var row = el("div", "row");
    [["allow", "allow once"], ["always", "always (this session)"], ["deny", "deny"]].forEach(function (d) {
      var b = el("button", d[0] === "deny" ? "danger" : "", d[1]);
      b.type = "button";
      b.dataset.decision = d[0];
      row.appendChild(b);
    });
    var state = el("span", "hint approval-state", "");
    row.appendChild(state);
    card.appendChild(row);
    return card;
  }

  function refreshApprovals() {
    wk.api("GET", "/sessions/" + sid + "/approvals").then(function (res) {
      if (!res.ok) return;
      approvalList.textContent = "";
      res.data.approvals.forEach(function (a) {
        approvalList.appendChild(approvalCard(a));
        var call = findCall(a.call_id);  // its card in the transcript waits, it does not run
        if (call) call.querySelector(".tool-state").textContent = "awaiting approval";
      });
      approvals.hidden = res.data.approvals.length === 0;
    });
  }

  approvalList.addEventListener("click", function (e) {
    var button = e.target.closest("button[data-decision]");
    if (!button) return;
    var card = button.closest(".approval");
    var state = card.querySelector(".approval-state");
    card.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    state.textContent = "sending…";
    var path = "/sessions/" + sid + "/approvals/" + encodeURIComponent(card.dataset.call);
    wk.api("POST", path, { decision: button.dataset.decision }).then(function (res) {
      if (res.ok) state.textContent = button.dataset.decision + " sent";
      else {
        state.textContent = "error: " + res.data.reason;
        card.querySelectorAll("button").forEach(function (b) { b.disabled = false; });
      }
    });
  });

  function onLive(delta) {
    if (delta.kind === "text") {
      live.hidden = false;
      liveText.textContent += delta.data.text || "";
    } else if (delta.kind === "turn_end") {
      live.hidden = true;
      liveText.textContent = "";
    }
  }

  function connect() {
    var after = Math.max(logSeq, lastSeq - LOG_KEPT, 0);
    var url = wk.base + "/sessions/" + sid + "/log?follow=true&live=true&after=" + after;
    if (body.dataset.sensitive) url += "&sensitive=true";
    var source = new EventSource(url);
    source.onmessage = function (e) { onDurable(JSON.parse(e.data)); };
    source.addEventListener("sync", function () { conn.textContent = "following"; conn.className = "conn on"; });
    source.addEventListener("live", function (e) { onLive(JSON.parse(e.data)); });
    source.onerror = function () { conn.textContent = "reconnecting…"; conn.className = "conn off"; };
  }

  chart();
  window.addEventListener("resize", chart);
  refreshApprovals();
  connect();

  document.getElementById("compose").addEventListener("submit", function (e) {
    e.preventDefault();
    var text = document.getElementById("prompt").value;
    var delivery = document.querySelector("input[name=delivery]:checked").value;
    composeStatus.textContent = "sending…";
    wk.api("POST", "/sessions/" + sid + "/prompt", { text: text, delivery: delivery }).then(function (res) {
      if (res.ok) {
        composeStatus.textContent = delivery + " admitted: " + res.data.input_id;
        document.getElementById("prompt").value = "";
      } else composeStatus.textContent = "error: " + res.data.reason;
    });
  });

  // -- the budget: raise it (POST /sessions/{id}/budget, the CSRF header as every change); a
  // session its budget paused is continued by the server ---------------------------------------
  var budgetStatus = document.getElementById("budget-status");
  document.getElementById("budget-form").addEventListener("submit", function (e) {
    e.preventDefault();
    var amount = document.getElementById("budget-amount").value.trim();
    budgetStatus.textContent = "raising…";
    wk.api("POST", "/sessions/" + sid + "/budget", { amount: amount, resume: true }).then(function (res) {
      if (!res.ok) { budgetStatus.textContent = "error: " + res.data.reason; return; }
      budgetStatus.textContent = "raised" + (res.data.input_id ? ", continuing: " + res.data.input_id : " (it was not paused by its budget)");
      document.getElementById("budget-amount").value = "";
    });
  });

  // -- rewind: revert to just before a turn (the server interrupts a running one first), and
  // undo it; the page is rendered again from the store afterwards ----------------------------
  var rewindStatus = document.getElementById("rewind-status");
  document.getElementById("turns").addEventListener("click", function (ev) {
    var button = ev.target.closest("button.rewind");
    if (!button) return;
    if (!window.confirm("Revert the session to just before turn " + button.dataset.no + "?")) return;
    rewindStatus.textContent = "rewinding…";
    wk.api("POST", "/sessions/" + sid + "/rewind", { turn_id: button.dataset.turn }).then(function (res) {
      if (res.ok) window.location.reload();
      else rewindStatus.textContent = "error: " + res.data.reason;
    });
  });
  var unrevert = document.getElementById("unrevert");
  if (unrevert) unrevert.addEventListener("click", function () {
    wk.api("POST", "/sessions/" + sid + "/unrevert").then(function (res) {
      if (res.ok) window.location.reload();
      else document.getElementById("revert-status").textContent = "error: " + res.data.reason;
    });
  });

  document.getElementById("interrupt").addEventListener("click", function () {
    wk.api("POST", "/sessions/" + sid + "/interrupt").then(function (res) {
      composeStatus.textContent = res.ok ? "interrupt requested" : "error: " + res.data.reason;
    });
  });
})();
