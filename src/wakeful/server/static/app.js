// wakeful inspector: follow a session's log over SSE and send steers, queued prompts, interrupts.
// Everything shown is built with textContent (never innerHTML), so no event can inject markup.
(function () {
  "use strict";
  var body = document.body;
  var sid = body.dataset.session;
  if (!sid) return;

  var lastSeq = Number(body.dataset.lastSeq || 0);
  var messages = document.getElementById("messages");
  var live = document.getElementById("live");
  var liveText = document.getElementById("live-text");
  var conn = document.getElementById("conn");
  var statusEl = document.getElementById("status");
  var logList = document.getElementById("log");
  var composeStatus = document.getElementById("compose-status");

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

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

  function renderMessage(seq, m) {
    var art = el("article", "msg role-" + m.role);
    art.dataset.seq = seq;
    art.dataset.id = m.id || "";
    var who = el("div", "who", m.role + " ");
    who.appendChild(el("span", "seq", "#" + seq));
    art.appendChild(who);
    (m.blocks || []).forEach(function (b) {
      if (b.type === "text") art.appendChild(el("div", "text", b.text));
      else if (b.type === "tool_call") art.appendChild(fold("tool_call", "→ " + b.name, JSON.stringify(b.input || {}, null, 2)));
      else if (b.type === "tool_result") art.appendChild(fold("tool_result", b.is_error ? "✗ tool result (error)" : "← tool result", resultText(b.output), b.is_error));
      else if (b.type === "image") {
        var fig = el("figure", "media");
        var img = document.createElement("img");
        img.src = b.data ? "data:" + b.media_type + ";base64," + b.data : "/sessions/" + sid + "/media/" + b.ref;
        img.alt = b.name || b.media_type;
        fig.appendChild(img);
        art.appendChild(fig);
      } else if (b.type === "thinking") art.appendChild(fold("thinking", "thinking", b.text));
      else if (b.type === "compact_summary") art.appendChild(fold("summary", "compaction summary", b.summary));
      else art.appendChild(fold("other", b.type, JSON.stringify(b, null, 2)));
    });
    return art;
  }

  function logLine(ev) {
    var li = el("li", "", "#" + ev.seq + " " + ev.type);
    logList.appendChild(li);
    while (logList.children.length > 200) logList.removeChild(logList.firstChild);
  }

  function setStatus(text) {
    statusEl.textContent = text;
    statusEl.className = "status status-" + text;
  }

  function removeRow(tableId, attr, value) {
    var rows = document.querySelectorAll("#" + tableId + " tr[data-" + attr + "]");
    rows.forEach(function (r) { if (r.dataset[attr] === value) r.remove(); });
  }

  function addPending(d) {
    var tr = el("tr");
    tr.dataset.input = d.input_id;
    tr.appendChild(el("td", "", d.input_id));
    tr.appendChild(el("td", "", d.kind));
    tr.appendChild(el("td", "", d.delivery));
    tr.appendChild(el("td", "", (d.payload && d.payload.text) || ""));
    document.querySelector("#pending tbody").appendChild(tr);
  }

  function refreshTurns() {
    fetch("/sessions/" + sid + "/turns", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (!data) return;
        var tbody = document.querySelector("#turns tbody");
        tbody.textContent = "";
        data.turns.forEach(function (t) {
          var tr = el("tr");
          tr.dataset.turn = t.id;
          tr.appendChild(el("td", "", t.id));
          var outcome = t.outcome || t.status;
          var cell = el("td", "outcome outcome-" + outcome, outcome);
          if (t.error) cell.appendChild(el("span", "hint", " " + t.error));
          tr.appendChild(cell);
          tr.appendChild(el("td", "", String(t.steps)));
          tr.appendChild(el("td", "", t.tokens_in + " / " + t.tokens_out));
          tr.appendChild(el("td", "", "$" + t.cost_usd.toFixed(4)));
          tbody.appendChild(tr);
        });
      });
  }

  function addReceipt(d) {
    var box = document.getElementById("receipts");
    var empty = box.querySelector(".empty");
    if (empty) empty.remove();
    var det = el("details", "fold receipt");
    var sum = el("summary", "", "step " + d.step + " · attempt " + d.attempt + " · " + (d.purpose || "step") + " · ");
    sum.appendChild(el("code", "", d.request_digest.slice(0, 12)));
    det.appendChild(sum);
    var table = el("table", "small");
    (d.sections || []).forEach(function (s) {
      var tr = el("tr");
      tr.appendChild(el("td", "", s[0]));
      tr.appendChild(el("td", "", s[1]));
      tr.appendChild(el("td", "", s[2].slice(0, 12)));
      table.appendChild(tr);
    });
    det.appendChild(table);
    box.appendChild(det);
  }

  // Messages go in seq order, also when one arrives late (a delivered input is fetched).
  function place(node) {
    var seq = Number(node.dataset.seq);
    var after = Array.prototype.find.call(messages.children, function (m) { return Number(m.dataset.seq) > seq; });
    if (Array.prototype.some.call(messages.children, function (m) { return Number(m.dataset.seq) === seq; })) return;
    messages.insertBefore(node, after || null);
  }

  // A delivered input names its message; the transcript holds it at the event's seq.
  function fetchMessage(seq) {
    var url = "/sessions/" + sid + "/messages?after_seq=" + (seq - 1) + (body.dataset.sensitive ? "&sensitive=true" : "");
    fetch(url, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (!data) return;
        data.messages.forEach(function (m) { if (m.seq === seq) place(renderMessage(m.seq, m.message)); });
      });
  }

  function onDurable(ev) {
    if (ev.seq <= lastSeq) return;
    lastSeq = ev.seq;
    logLine(ev);
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
    } else if (ev.type === "turn.started") { setStatus("running"); refreshTurns(); }
    else if (ev.type === "turn.ended") { setStatus(d.outcome === "completed" ? "idle" : d.outcome); refreshTurns(); }
    else if (ev.type === "usage.recorded") {
      var inEl = document.getElementById("usage-in"), outEl = document.getElementById("usage-out");
      inEl.textContent = String(Number(inEl.textContent) + (d.input_tokens || 0));
      outEl.textContent = String(Number(outEl.textContent) + (d.output_tokens || 0));
    }
  }

  function onLive(delta) {
    if (delta.kind === "text") {
      live.hidden = false;
      liveText.textContent += delta.data.text || "";
    } else if (delta.kind === "turn_end") {
      live.hidden = true;
      liveText.textContent = "";
    }
  }

  var source = null;
  function connect() {
    var url = "/sessions/" + sid + "/log?follow=true&live=true&after=" + lastSeq;
    if (body.dataset.sensitive) url += "&sensitive=true";
    source = new EventSource(url);
    source.onmessage = function (e) { onDurable(JSON.parse(e.data)); };
    source.addEventListener("sync", function () { conn.textContent = "following"; conn.className = "conn on"; });
    source.addEventListener("live", function (e) { onLive(JSON.parse(e.data)); });
    source.onerror = function () { conn.textContent = "reconnecting…"; conn.className = "conn off"; };
  }
  connect();

  function post(path, payload) {
    return fetch(path, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Wakeful-CSRF": "1" },
      body: JSON.stringify(payload || {}),
    }).then(function (r) {
      return r.json().then(function (data) { return { ok: r.ok, data: data }; });
    });
  }

  document.getElementById("compose").addEventListener("submit", function (e) {
    e.preventDefault();
    var text = document.getElementById("prompt").value;
    var delivery = document.querySelector("input[name=delivery]:checked").value;
    composeStatus.textContent = "sending…";
    post("/sessions/" + sid + "/prompt", { text: text, delivery: delivery }).then(function (res) {
      if (res.ok) {
        composeStatus.textContent = delivery + " admitted: " + res.data.input_id;
        document.getElementById("prompt").value = "";
      } else composeStatus.textContent = "error: " + res.data.reason;
    });
  });

  document.getElementById("interrupt").addEventListener("click", function () {
    post("/sessions/" + sid + "/interrupt").then(function (res) {
      composeStatus.textContent = res.ok ? "interrupt requested" : "error: " + res.data.reason;
    });
  });
})();
