(function () {
  var match = /[#&]token=([^&]+)/.exec(location.hash);
  if (!match) return;
  history.replaceState(null, "", location.pathname + location.search);
  var form = document.getElementById("login");
  form.elements.token.value = decodeURIComponent(match[1]);
  form.submit();
})();
