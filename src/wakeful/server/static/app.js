// wakeful inspector, shared by every page: the mount prefix, element helpers, API calls, local
// times and edit diffs. Everything shown is built with textContent (never innerHTML), so no
// session content can inject markup.
(function () {
  "use strict";
  var base = document.body.dataset.base || "";

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // A JSON API call under the mount prefix; a state change carries the CSRF header.
  function api(method, path, payload) {
    var init = { method: method, credentials: "same-origin", headers: {} };
    if (method !== "GET") {
      init.headers["Content-Type"] = "application/json";
      init.headers["X-Wakeful-CSRF"] = "1";
      init.body = JSON.stringify(payload || {});
    }
    return fetch(base + path, init).then(function (r) {
      return r.json().then(function (data) { return { ok: r.ok, status: r.status, data: data }; },
                           function () { return { ok: false, status: r.status, data: { reason: r.statusText } }; });
    });
  }

  // Times are sent as epoch milliseconds and shown in the browser's own time zone.
  function localTime(ms) {
    return new Date(Number(ms)).toLocaleString(undefined, {
      year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
    });
  }
  function localTimes(root) {
    (root || document).querySelectorAll("time[data-ms]").forEach(function (t) {
      t.textContent = localTime(t.dataset.ms);
    });
  }

  // A line diff (longest common subsequence) of `a` into `b`: [[" " | "-" | "+", line], ...].
  function lineDiff(a, b) {
    var pre = 0;
    while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++;
    var suf = 0;
    while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;
    var A = a.slice(pre, a.length - suf), B = b.slice(pre, b.length - suf);
    var mid = [];
    if (A.length * B.length > 250000) {  // too big to align: all out, all in
      A.forEach(function (l) { mid.push(["-", l]); });
      B.forEach(function (l) { mid.push(["+", l]); });
    } else {
      var L = [];
      for (var i = A.length; i >= 0; i--) {
        L[i] = [];
        for (var j = B.length; j >= 0; j--) {
          L[i][j] = i === A.length || j === B.length ? 0
            : A[i] === B[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
        }
      }
      i = 0; j = 0;
      while (i < A.length || j < B.length) {
        if (i < A.length && j < B.length && A[i] === B[j]) { mid.push([" ", A[i]]); i++; j++; }
        else if (i < A.length && (j === B.length || L[i + 1][j] >= L[i][j + 1])) { mid.push(["-", A[i]]); i++; }
        else { mid.push(["+", B[j]]); j++; }
      }
    }
    var out = a.slice(0, pre).map(function (l) { return [" ", l]; }).concat(mid);
    return out.concat(a.slice(a.length - suf).map(function (l) { return [" ", l]; }));
  }

  // An `edit_file` call: its `old` and `new` text as a diff (data-old / data-new on `.diff`).
  function renderDiff(box) {
    var head = el("div", "diff-head", box.dataset.path || "");
    var pre = el("pre", "diff-body");
    var lines = function (text) { return text.replace(/\n$/, "").split("\n"); };
    lineDiff(lines(box.dataset.old), lines(box.dataset.new)).forEach(function (d) {
      var cls = d[0] === "+" ? "d-add" : d[0] === "-" ? "d-del" : "d-ctx";
      pre.appendChild(el("span", cls, d[0] + " " + d[1] + "\n"));
    });
    box.textContent = "";
    box.appendChild(head);
    box.appendChild(pre);
  }
  function diffs(root) {
    (root || document).querySelectorAll(".diff[data-old]").forEach(function (box) {
      if (!box.dataset.done) { renderDiff(box); box.dataset.done = "1"; }
    });
  }

  // Signing out changes state, so it carries the CSRF header like every other change.
  var logout = document.querySelector("form.logout");
  if (logout) logout.addEventListener("submit", function (e) {
    e.preventDefault();
    api("POST", "/ui/logout").then(function () { location.href = base + "/ui/login"; });
  });

  localTimes();
  diffs();
  window.wakeful = { base: base, el: el, api: api, localTime: localTime, localTimes: localTimes,
                     lineDiff: lineDiff, diffs: diffs };
})();
