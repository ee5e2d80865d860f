// Send windows and caps (integrations/admin_forms.py): a window's days and hours show only for a custom window,
// its holidays and spread for any window; a workflow's or a step's cap rows only when it sets its own caps. A row
// with an error always shows. Without JavaScript every field shows, and the form works the same.
(function () {
  "use strict";

  function rowsOf(form, names) {
    return names
      .map(function (name) { return form.querySelector(".field-" + name); })
      .filter(Boolean)
      .map(function (box) { return box.closest(".form-row") || box; });
  }

  function show(rows, visible) {
    rows.forEach(function (row) {
      row.style.display = visible || row.querySelector(".errorlist") ? "" : "none";
    });
  }

  function sync(form) {
    form.querySelectorAll("select[name$='window']").forEach(function (select) {
      var prefix = select.name.slice(0, -"window".length);
      var chosen = select.value !== "" && select.value !== "none";
      show(rowsOf(form, [prefix + "days", prefix + "hours"]), select.value === "custom");
      show(rowsOf(form, [prefix + "holidays", prefix + "fr_holidays", prefix + "spread"]), chosen);
    });
    capRows(form, "", true);
    form.querySelectorAll("input[type=radio][name$='caps']:checked").forEach(function (radio) {
      capRows(form, radio.name.slice(0, -"caps".length), radio.value === "these");
    });
  }

  // The filled cap rows and one empty row after them (the next appears as the last is filled).
  function capRows(form, prefix, visible) {
    var blankShown = false;
    for (var i = 0; ; i += 1) {
      var max = form.querySelector("[name='" + prefix + "cap" + i + "_max']");
      if (!max) {
        return;
      }
      var every = form.querySelector("[name='" + prefix + "cap" + i + "_every']");
      var filled = max.value !== "" || (every && every.value !== "");
      show(rowsOf(form, [prefix + "cap" + i + "_max"]), visible && (filled || !blankShown));
      blankShown = blankShown || !filled;
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("form").forEach(function (form) {
      if (!form.querySelector("select[name$='window']")) {
        return;
      }
      sync(form);
      form.addEventListener("change", function () { sync(form); });
      form.addEventListener("input", function () { sync(form); });
    });
  });
})();
