/* Tags as chips: type a tag and press Enter or comma; × removes one. The original input keeps "a, b, c". */
(function () {
  "use strict";
  function init(box) {
    const input = box.querySelector("input");
    if (!input || box.dataset.ready) return;
    box.dataset.ready = "1";
    const list = input.getAttribute("list");
    input.type = "hidden";
    const chips = document.createElement("div");
    chips.className = "relay-chips";
    const entry = document.createElement("input");
    entry.type = "text";
    entry.className = "relay-chip-entry";
    entry.placeholder = "Add a tag…";
    entry.setAttribute("aria-label", "Add a tag");
    if (list) entry.setAttribute("list", list);
    box.insertBefore(chips, input);
    box.insertBefore(entry, input);
    const help = box.querySelector(".help");
    if (help) help.textContent = "Type a tag and press Enter; pick one of the account's tags as you type.";
    const tags = function () { return input.value.split(",").map(function (t) { return t.trim(); }).filter(Boolean); };
    const render = function () {
      chips.replaceChildren();
      tags().forEach(function (tag, index) {
        const chip = document.createElement("span");
        chip.className = "relay-chip";
        chip.textContent = tag;
        const x = document.createElement("button");
        x.type = "button";
        x.textContent = "×";
        x.setAttribute("aria-label", "Remove " + tag);
        x.addEventListener("click", function () {
          const all = tags();
          all.splice(index, 1);
          input.value = all.join(", ");
          render();
        });
        chip.appendChild(x);
        chips.appendChild(chip);
      });
    };
    const add = function () {
      const tag = entry.value.replace(/,/g, "").trim();
      if (tag && !tags().map(function (t) { return t.toLowerCase(); }).includes(tag.toLowerCase())) {
        input.value = [...tags(), tag].join(", ");
      }
      entry.value = "";
      render();
    };
    entry.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === ",") { event.preventDefault(); add(); }
      else if (event.key === "Backspace" && !entry.value) { const all = tags(); all.pop(); input.value = all.join(", "); render(); }
    });
    entry.addEventListener("change", function () { if (entry.value) add(); });
    entry.form && entry.form.addEventListener("submit", function () { if (entry.value) add(); });
    render();
  }
  document.addEventListener("DOMContentLoaded", function () { document.querySelectorAll("[data-tags]").forEach(init); });
})();
