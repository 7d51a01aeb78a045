// A shared session's view: follow its log while the link holds; say so when it is revoked.
(function () {
  "use strict";
  var conn = document.getElementById("conn");
  var fresh = document.getElementById("shared-new");
  if (!fresh) return; // one turn: a snapshot
  var base = document.body.dataset.base || "";
  var last = document.body.dataset.lastSeq || "0";
  var source = new EventSource(base + "/ui/shared/log?after=" + encodeURIComponent(last));
  source.onopen = function () { conn.textContent = "following"; };
  source.onmessage = function () { fresh.hidden = false; };
  source.addEventListener("closed", function () {
    source.close();
    conn.textContent = "this link was revoked or has expired";
  });
  source.onerror = function () { conn.textContent = "not connected"; };
})();
