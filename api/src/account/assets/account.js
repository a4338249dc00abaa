// The web application's only script (served from this origin; the CSP allows
// no other): copy buttons, and the invite code taken from the link's fragment
// (the fragment never reaches a server, so the code stays out of every log).
'use strict';
document.addEventListener('DOMContentLoaded', function () {
  document.querySelectorAll('[data-copy]').forEach(function (button) {
    button.addEventListener('click', function () {
      var id = button.getAttribute('data-copy');
      var source = document.getElementById(id);
      var status = document.querySelector('[data-copied="' + id + '"]');
      if (!source || !navigator.clipboard) return;
      navigator.clipboard.writeText(source.textContent || '').then(function () {
        if (status) status.textContent = 'Copied.';
      }, function () {
        if (status) status.textContent = 'Copy failed: select the text and copy it.';
      });
    });
  });
  var code = document.querySelector('[data-from-fragment]');
  if (code && window.location.hash.length > 1) {
    code.value = decodeURIComponent(window.location.hash.slice(1));
    history.replaceState(null, '', window.location.pathname);
  }
});
