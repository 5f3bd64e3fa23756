// kernelbox's one script. A running submission's page reloads its live
// part (#live, data-src) until the submission ends; everything else works
// without it.
(function () {
  "use strict";
  function poll() {
    var live = document.getElementById("live");
    if (!live || live.dataset.ended === "true") return;
    setTimeout(function () {
      fetch(live.dataset.src, { credentials: "same-origin", cache: "no-store" })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) {
          var box = document.createElement("div");
          box.innerHTML = html;
          var next = box.querySelector("#live");
          if (next) live.replaceWith(next);
          poll();
        })
        .catch(function () { setTimeout(poll, 3000); });
    }, 1000);
  }
  document.addEventListener("DOMContentLoaded", poll);
})();
