// gpulint report: everything is already drawn (SVG, tables); this only adds hover details and a copy button.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("gpulint-data").textContent);
  var detail = document.getElementById("detail");

  function show(target) {
    if (!detail) { return; }
    var title = target.querySelector("title");
    detail.textContent = title ? title.textContent : "";
  }

  var marks = document.querySelectorAll("svg .hit");
  for (var i = 0; i < marks.length; i++) {
    marks[i].addEventListener("mouseenter", function (ev) { ev.currentTarget.classList.add("hl"); show(ev.currentTarget); });
    marks[i].addEventListener("mouseleave", function (ev) { ev.currentTarget.classList.remove("hl"); });
  }

  var copy = document.getElementById("copy-command");
  if (copy) {
    copy.addEventListener("click", function () {
      var text = document.getElementById("reproduce").textContent;
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(function () { copy.textContent = "Copied"; }, function () {});
      }
    });
  }

  // The numbers on the page come from the embedded JSON: say how many runs it holds, as a visible check.
  var runs = (data.report && data.report.runs) ? data.report.runs.length : 0;
  document.documentElement.setAttribute("data-runs", String(runs));
  document.documentElement.setAttribute("data-ready", "1");
})();
