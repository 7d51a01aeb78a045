// A share link's page: post the secret from the address's fragment (never sent to a server by
// the browser, so never in a log) and drop it from the address (docs/access.md).
(function () {
  "use strict";
  var secret = window.location.hash.slice(1);
  window.history.replaceState(null, "", window.location.pathname);
  if (!secret) {
    document.getElementById("share-status").textContent = "This link holds no secret.";
    return;
  }
  document.getElementById("share-secret").value = secret;
  document.getElementById("share-form").submit();
})();
