// wakeful inspector, the schedules page: add one, pause, resume or delete one (through the API).
(function () {
  "use strict";
  var wk = window.wakeful;
  var status = document.getElementById("schedule-status");
  var form = document.getElementById("schedule-add");
  if (form) {
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      var body = { prompt: document.getElementById("schedule-prompt").value };
      body[document.getElementById("schedule-kind").value] = document.getElementById("schedule-spec").value.trim();
      body.timezone = document.getElementById("schedule-tz").value.trim() || "UTC";
      body.missed = document.getElementById("schedule-missed").value;
      var session = document.getElementById("schedule-session").value.trim();
      if (session) body.session_id = session;
      status.textContent = "adding…";
      wk.api("POST", "/schedules", body).then(function (res) {
        if (!res.ok) { status.textContent = "error: " + (res.data.reason || res.status); return; }
        location.reload();
      });
    });
  }
  document.querySelectorAll("tr[data-schedule]").forEach(function (row) {
    var id = row.dataset.schedule;
    row.querySelectorAll("button").forEach(function (button) {
      button.addEventListener("click", function () {
        var action = button.className;
        var call = action === "delete"
          ? wk.api("DELETE", "/schedules/" + id)
          : wk.api("POST", "/schedules/" + id + "/" + action);
        call.then(function (res) {
          if (!res.ok) { if (status) status.textContent = "error: " + (res.data.reason || res.status); return; }
          location.reload();
        });
      });
    });
  });
})();
