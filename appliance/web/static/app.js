// kernelbox's one script. A running submission's page reloads its live
// part (#live, data-src) until the submission ends; everything else works
// without it.
(function () {
  "use strict";
  var failures = 0;
  function poll() {
    var live = document.getElementById("live");
    if (!live || live.dataset.ended === "true") return;
    setTimeout(function () {
      fetch(live.dataset.src, { credentials: "same-origin", cache: "no-store" })
        .then(function (r) {
          // Signed out (the answer is the sign-in page) or refused: the
          // whole page says why.
          if (r.redirected || (r.status >= 400 && r.status < 500)) { location.reload(); return null; }
          if (!r.ok) throw new Error(String(r.status));
          return r.text();
        })
        .then(function (html) {
          if (html === null) return;
          var box = document.createElement("div");
          box.innerHTML = html;
          var next = box.querySelector("#live");
          if (!next) { location.reload(); return; }
          failures = 0;
          live.replaceWith(next);
          poll();
        })
        .catch(function () {
          // The box restarting: wait longer each time, give up after a while.
          if (++failures < 10) setTimeout(poll, 1000 * failures);
        });
    }, 1000);
  }
  document.addEventListener("DOMContentLoaded", poll);
})();
