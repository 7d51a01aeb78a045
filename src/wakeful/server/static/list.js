// wakeful inspector, the session list: create a session from the page.
(function () {
  "use strict";
  var wk = window.wakeful;
  var form = document.getElementById("create");
  if (!form) return;
  var status = document.getElementById("create-status");

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var body = {};
    var title = document.getElementById("create-title").value.trim();
    var model = document.getElementById("create-model").value.trim();
    var prompt = document.getElementById("create-prompt").value;
    if (title) body.title = title;
    if (model) body.model = model;
    if (prompt.trim()) body.prompt = { text: prompt };
    status.textContent = "creating…";
    wk.api("POST", "/sessions", body).then(function (res) {
      if (!res.ok) { status.textContent = "error: " + (res.data.reason || res.status); return; }
      location.href = wk.base + "/ui/sessions/" + res.data.session.id;
    });
  });
})();
