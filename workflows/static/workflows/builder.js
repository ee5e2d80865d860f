/* Relay's workflow builder: step cards, reorder (buttons and drag and drop), pickers, live checks, preview.
   Plain JavaScript, no library, no network beyond this admin: everything works offline. */
(function () {
  "use strict";
  const config = JSON.parse(document.getElementById("relay-builder")?.textContent || "{}");

  function csrf() {
    const input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  // --- rows (key/value, conditions) -------------------------------------------------------------
  function initRows(root) {
    root.querySelectorAll("[data-rows]").forEach(function (rows) {
      if (rows.dataset.ready) return;
      rows.dataset.ready = "1";
      rows.addEventListener("click", function (event) {
        const add = event.target.closest("[data-add-row]");
        const remove = event.target.closest("[data-remove-row]");
        if (add) {
          const all = rows.querySelectorAll("[data-row]");
          const last = all[all.length - 1];
          const copy = last.cloneNode(true);
          unready(copy);
          copy.querySelectorAll("input").forEach(function (i) { i.value = ""; });
          copy.querySelectorAll("select").forEach(function (s) { s.selectedIndex = 0; s.dataset.value = ""; });
          copy.querySelectorAll(".relay-personalize").forEach(function (b) { b.remove(); });
          last.after(copy);
          initPersonalize(copy);
          initConditions(copy);
          refreshChoices();
          updateSplits();
          const first = copy.querySelector("input, select");
          if (first) first.focus();
        } else if (remove) {
          const row = remove.closest("[data-row]");
          if (rows.querySelectorAll("[data-row]").length > 1) row.remove();
          else row.querySelectorAll("input").forEach(function (i) { i.value = ""; });
          updateSplits();
        }
      });
    });
    initConditions(root);
  }

  // A copy of a row or block carries its original's "ready" marks: clear them so it gets its own listeners.
  function unready(root) {
    [root, ...root.querySelectorAll("*")].forEach(function (el) {
      ["ready", "personalizeReady", "counterReady", "jsonReady"].forEach(function (k) { delete el.dataset[k]; });
    });
  }

  // Condition rows: a path beside "a value sent with the trigger…", and a value input that fits the operator.
  const PLACEHOLDERS = { text: "value", number: "a number", list: "values, separated by commas", date: "2027-01-15, or -3 days" };
  function initConditions(root) {
    root.querySelectorAll("[data-conditions] [data-row]").forEach(function (row) {
      if (row.dataset.ready) return;
      row.dataset.ready = "1";
      const field = row.querySelector("[data-condition-field]");
      const path = row.querySelector("[data-condition-path]");
      const op = row.querySelector("[data-condition-op]");
      const value = row.querySelector("[data-condition-value]");
      const bool = row.querySelector("[data-condition-bool]");
      const update = function () {
        const chosen = field && field.options[field.selectedIndex];
        const kind = (op && op.options[op.selectedIndex] && op.options[op.selectedIndex].dataset.kind) || "text";
        if (path) path.hidden = !(field && field.value.endsWith("."));
        const isBool = !!(chosen && chosen.dataset.boolean) && kind === "text";
        if (value) {
          value.hidden = kind === "none" || isBool;
          value.placeholder = PLACEHOLDERS[kind] || "value";
          value.inputMode = kind === "number" ? "decimal" : "text";
        }
        if (bool) {
          bool.hidden = !isBool;
          if (isBool) {
            if (value.value !== "true" && value.value !== "false") value.value = "true";
            bool.value = value.value;
          }
        }
      };
      if (field) field.addEventListener("change", update);
      if (op) op.addEventListener("change", update);
      if (bool) bool.addEventListener("change", function () { value.value = bool.value; });
      update();
    });
  }

  // --- where the run goes: step choices, the steps' results, branch blocks, split totals -------------
  function stepRefs() {
    const kinds = config.stepKinds || {};
    const refs = [];
    document.querySelectorAll("[data-steps] > [data-step]").forEach(function (card) {
      if (card.dataset.removed) return;
      const type = card.querySelector("[data-action-type]")?.value || "";
      const key = (card.querySelector("[data-step-key]")?.value || "").trim();
      const name = (card.querySelector(".relay-step-head input[name$='-name']")?.value || "").trim();
      refs.push({ card: card, key: key, type: type, label: name || (kinds[type] ? kinds[type].label : "Step") });
    });
    return refs;
  }
  function option(value, label, selected) {
    const o = document.createElement("option");
    o.value = value; o.textContent = label; o.selected = !!selected;
    return o;
  }
  function refreshChoices() {
    const refs = stepRefs();
    document.querySelectorAll("select[data-step-choice]").forEach(function (select) {
      const owner = select.closest("[data-step]");
      const current = select.value || select.dataset.value || "";
      const only = select.dataset.only || "";
      select.replaceChildren();
      select.appendChild(option("", select.dataset.blank || "— choose a step —", !current));
      let found = !current || (current === "$end" && !!select.dataset.end);
      refs.forEach(function (ref, index) {
        if (ref.card === owner || !ref.key || (only && only.split("|").indexOf(ref.type) < 0)) return;
        if (ref.key === current) found = true;
        select.appendChild(option(ref.key, (index + 1) + ". " + ref.label + " (" + ref.key + ")", ref.key === current));
      });
      if (!found) select.appendChild(option(current, current + " (no such step)", true));
      if (select.dataset.end) select.appendChild(option("$end", select.dataset.end, current === "$end"));
      select.dataset.value = select.value;
    });
    document.querySelectorAll("optgroup[data-earlier-steps]").forEach(function (group) {
      const owner = group.closest("[data-step]");
      const select = group.closest("select");
      const current = select.dataset.renamed || select.value;
      delete select.dataset.renamed;
      group.replaceChildren();
      refs.forEach(function (ref) {
        if (ref.card === owner || !ref.key) return;
        const base = "steps." + ref.key;
        const add = function (value, label, boolean) {
          const o = option(value, ref.label + ": " + label, value === current);
          if (boolean) o.dataset.boolean = "1";
          group.appendChild(o);
        };
        // what each step type's result offers (its form's result_fields, sent by the server as stepKinds)
        (((config.stepKinds || {})[ref.type] || {}).results || []).forEach(function (result) {
          add(base + result[0], result[1], result[2]);
        });
      });
      if (current && select.value !== current) {
        // a step's result chosen before that step was renamed or removed: keep it, named as typed
        group.appendChild(option(current, current, true));
      }
    });
  }
  // A new step's key: step_<its position>, or the next number free (keys stay put when steps move).
  function nextStepKey() {
    const refs = stepRefs();
    const keys = new Set(refs.map(function (r) { return r.key; }).filter(Boolean));
    let n = refs.length;
    while (keys.has("step_" + n)) n += 1;
    return "step_" + n;
  }
  function showNextRow(card) {
    const type = card.querySelector("[data-action-type]")?.value || "";
    const kind = (config.stepKinds || {})[type];
    const row = card.querySelector("[data-next-row]");
    if (!row) return;
    const useJson = card.querySelector("[data-use-json]")?.checked;
    row.hidden = !!(kind && kind.decides && !useJson);
    const label = row.querySelector("[data-next-label]");
    if (label && kind) label.textContent = kind.nextLabel;
  }

  function initBlocks(root) {
    root.querySelectorAll("[data-blocks]").forEach(function (blocks) {
      if (blocks.dataset.ready) return;
      blocks.dataset.ready = "1";
      const base = blocks.dataset.blocks;
      const renumber = function () {
        blocks.querySelectorAll(":scope > [data-block]").forEach(function (block, i) {
          const label = block.querySelector("[data-block-number]");
          if (label) label.textContent = label.textContent.replace(/\d+$/, String(i + 1));
        });
      };
      blocks.addEventListener("click", function (event) {
        const add = event.target.closest("[data-add-block]");
        const remove = event.target.closest("[data-remove-block]");
        if (add && add.parentElement === blocks) {
          const all = blocks.querySelectorAll(":scope > [data-block]");
          const last = all[all.length - 1];
          let index = 0;
          all.forEach(function (b) { index = Math.max(index, parseInt(b.dataset.blockIndex, 10) + 1); });
          const copy = last.cloneNode(true);
          unready(copy);
          const from = base + "-" + last.dataset.blockIndex + "-", to = base + "-" + index + "-";
          copy.dataset.blockIndex = String(index);
          copy.querySelectorAll("[name]").forEach(function (el) { el.name = el.name.replace(from, to); });
          copy.querySelectorAll("[data-rows]").forEach(function (el) { el.dataset.rows = el.dataset.rows.replace(from, to); });
          const rows = copy.querySelectorAll("[data-row]");
          rows.forEach(function (row, i) { if (i < rows.length - 1) row.remove(); });
          copy.querySelectorAll("input").forEach(function (i) { i.value = ""; });
          copy.querySelectorAll("select").forEach(function (s) { s.selectedIndex = 0; s.dataset.value = ""; });
          copy.querySelectorAll(".relay-personalize").forEach(function (b) { b.remove(); });
          last.after(copy);
          initRows(copy);
          renumber();
          refreshChoices();
          copy.querySelector("input").focus();
        } else if (remove) {
          const block = remove.closest("[data-block]");
          if (blocks.querySelectorAll(":scope > [data-block]").length > 1) block.remove();
          else block.querySelectorAll("input").forEach(function (i) { i.value = ""; });
          renumber();
        }
      });
    });
  }

  function updateSplits() {
    document.querySelectorAll("[data-split]").forEach(function (split) {
      const out = split.querySelector("[data-split-total]");
      if (!out) return;
      let total = 0, bad = false;
      split.querySelectorAll("[data-split-weight]").forEach(function (input) {
        const n = Number(input.value);
        if (input.value === "" || !Number.isInteger(n) || n < 1 || n > 100) bad = true; else total += n;
      });
      const ok = !bad && total === 100;
      out.textContent = ok ? "Total: 100% ✓" : bad ? "Each share is a whole number from 1 to 100." :
        "Total: " + total + "%: the shares must add up to 100%.";
      out.className = "relay-split-total " + (ok ? "relay-ok" : "relay-bad");
    });
  }
  // Renaming a step's key carries every choice that named it (paths, "then go to", conditions on its result).
  function renameKey(from, to) {
    if (!from || !to || from === to) return;
    document.querySelectorAll("select[data-step-choice]").forEach(function (select) {
      if ((select.value || select.dataset.value) === from) { select.dataset.value = to; select.value = ""; }
    });
    document.querySelectorAll("select[data-condition-field]").forEach(function (select) {
      const prefix = "steps." + from + ".";
      if (select.value.startsWith(prefix)) {
        const renamed = "steps." + to + "." + select.value.slice(prefix.length);
        select.dataset.renamed = renamed;
      }
    });
  }
  document.addEventListener("focusin", function (event) {
    const t = event.target;
    if (t.matches && t.matches("[data-step-key]") && t.value.trim()) t.dataset.prev = t.value.trim();
  });
  document.addEventListener("input", function (event) {
    const t = event.target;
    if (t.matches && t.matches("[data-step-key]")) {
      const typed = t.value.trim();
      if (typed) { renameKey(t.dataset.prev, typed); t.dataset.prev = typed; }  // cleared on the way: keep the last
    }
    if (t.matches && t.matches("[data-split-weight]")) updateSplits();
    if (t.matches && (t.matches("[data-step-key]") || t.matches(".relay-step-head input[name$='-name']"))) refreshChoices();
  });

  // --- fields shown for one choice only (wait: for a while / until; voice: message / recording) -------
  function initShowIf(root) {
    root.querySelectorAll("[data-show-if]").forEach(function (row) {
      const [name, wanted] = row.dataset.showIf.split("=");
      const scope = row.closest("[data-step]") || document;
      const inputs = scope.querySelectorAll('[name="' + name + '"]');
      const update = function () {
        let current = "";
        inputs.forEach(function (i) { if ((i.type !== "radio" || i.checked)) current = i.value; });
        row.hidden = wanted.split("|").indexOf(current) < 0;
      };
      inputs.forEach(function (i) { i.addEventListener("change", update); });
      update();
    });
  }

  // --- trigger fields: show what the chosen trigger needs ------------------------------------------
  function initTrigger() {
    const type = document.querySelectorAll("input[name=trigger_type]");
    const event = document.querySelector("select[name=trigger_event]");
    if (!type.length || !event) return;
    const row = function (name) {
      const el = document.querySelector("[name=" + name + "], [name=" + name + "-field]");
      return el ? el.closest(".form-row") : null;
    };
    const update = function () {
      let kind = "";
      type.forEach(function (i) { if (i.checked) kind = i.value; });
      const isEvent = kind === "event";
      const name = event.value;
      const show = function (field, visible) { const r = row(field); if (r) r.hidden = !visible; };
      show("trigger_event", isEvent);
      show("trigger_custom_event", isEvent && name === "__other__");
      show("trigger_tag", isEvent && (name === "tag.added" || name === "tag.removed"));
      show("trigger_filter", isEvent);
    };
    type.forEach(function (i) { i.addEventListener("change", update); });
    event.addEventListener("change", update);
    update();
  }

  // --- personalisation picker ---------------------------------------------------------------
  let openMenu = null;
  function closeMenu() { if (openMenu) { openMenu.remove(); openMenu = null; } }
  document.addEventListener("click", function (event) {
    if (openMenu && !openMenu.contains(event.target) && !event.target.closest(".relay-personalize")) closeMenu();
  });

  function insertAt(field, text) {
    const start = field.selectionStart ?? field.value.length;
    const end = field.selectionEnd ?? field.value.length;
    field.value = field.value.slice(0, start) + text + field.value.slice(end);
    field.focus();
    field.selectionStart = field.selectionEnd = start + text.length;
    field.dispatchEvent(new Event("input", { bubbles: true }));
  }

  function initPersonalize(root) {
    root.querySelectorAll("[data-personalize]").forEach(function (field) {
      if (field.dataset.personalizeReady) return;
      field.dataset.personalizeReady = "1";
      const button = document.createElement("button");
      button.type = "button";
      button.className = "relay-personalize";
      button.textContent = field.closest("[data-row]") ? "{ }" : "{ } Personalize";
      button.title = "Insert a contact field, a custom field or trigger data";
      field.after(button);
      button.addEventListener("click", function () {
        closeMenu();
        const menu = document.createElement("div");
        menu.className = "relay-menu";
        menu.setAttribute("role", "menu");
        let group = "";
        (config.variables || []).forEach(function (entry) {
          if (entry.group !== group) {
            group = entry.group;
            const heading = document.createElement("div");
            heading.className = "relay-menu-group";
            heading.textContent = group;
            menu.appendChild(heading);
          }
          const item = document.createElement("button");
          item.type = "button";
          item.className = "relay-menu-item";
          item.setAttribute("role", "menuitem");
          item.textContent = entry.label;
          const code = document.createElement("code");
          code.textContent = entry.value.endsWith(".") ? entry.value + "…" : entry.value;
          item.appendChild(code);
          item.addEventListener("click", function () {
            let value = entry.value;
            if (value.endsWith(".")) {
              const key = window.prompt("The name of the value sent with the trigger, e.g. plan");
              if (!key) return;
              value += key.trim();
            }
            insertAt(field, "{{ " + value + " }}");
            closeMenu();
          });
          menu.appendChild(item);
        });
        button.after(menu);
        openMenu = menu;
      });
    });
  }

  // --- live checks: SMS length and segments, JSON -------------------------------------------
  const GSM = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà";
  const GSM_EXT = "^{}\\[~]|€";
  function smsCount(text) {
    let gsm = true, units = 0;
    for (const ch of text) {
      if (GSM.includes(ch)) units += 1;
      else if (GSM_EXT.includes(ch)) units += 2;
      else { gsm = false; break; }
    }
    if (!gsm) {
      const length = [...text].length;
      return { length: length, segments: length <= 70 ? 1 : Math.ceil(length / 67), encoding: "Unicode" };
    }
    return { length: units, segments: units <= 160 ? 1 : Math.ceil(units / 153), encoding: "GSM" };
  }
  function initSmsCounter(root) {
    root.querySelectorAll("[data-sms-counter]").forEach(function (field) {
      if (field.dataset.counterReady) return;
      field.dataset.counterReady = "1";
      const out = document.createElement("div");
      out.className = "relay-counter";
      out.setAttribute("aria-live", "polite");
      field.parentNode.insertBefore(out, field.nextSibling);
      const update = function () {
        const c = smsCount(field.value);
        const hasVars = /\{\{|\{%/.test(field.value);
        out.textContent = c.length + " characters · " + c.segments + " SMS" + (c.segments === 1 ? "" : " (sent in parts)") +
          (c.encoding === "Unicode" ? " · emoji or special characters: 70 per SMS" : "") +
          (hasVars ? " · before personalisation" : "");
        out.classList.toggle("relay-counter-warn", c.segments > 1);
      };
      field.addEventListener("input", update);
      update();
    });
  }
  function initJsonCheck(root) {
    root.querySelectorAll("[data-json-check]").forEach(function (field) {
      if (field.dataset.jsonReady) return;
      field.dataset.jsonReady = "1";
      const out = document.createElement("div");
      out.className = "relay-json-status";
      out.setAttribute("aria-live", "polite");
      field.parentNode.insertBefore(out, field.nextSibling);
      const update = function () {
        const text = field.value.trim();
        if (!text) { out.textContent = ""; out.className = "relay-json-status"; return; }
        try { JSON.parse(text); out.textContent = "✓ Valid JSON"; out.className = "relay-json-status relay-ok"; }
        catch (error) { out.textContent = "✗ Not valid JSON yet: " + error.message; out.className = "relay-json-status relay-bad"; }
      };
      field.addEventListener("input", update);
      update();
    });
  }

  // --- steps: add, choose the action, reorder, remove, JSON mode --------------------------------
  function builder() { return document.querySelector(".relay-builder"); }
  function totalForms() {
    const b = builder();
    return b ? b.querySelector('input[name="' + b.dataset.prefix + '-TOTAL_FORMS"]') : null;
  }
  function renumber() {
    const list = document.querySelector("[data-steps]");
    if (!list) return;
    let n = 0;
    list.querySelectorAll(":scope > [data-step]").forEach(function (card) {
      if (card.dataset.removed) return;
      const position = card.querySelector("[data-position]");
      if (position) position.value = n;
      const number = card.querySelector("[data-step-number]");
      if (number) number.textContent = String(n + 1);
      n += 1;
    });
  }
  function showConfig(card) {
    const select = card.querySelector("[data-action-type]");
    const json = card.querySelector("[data-use-json]");
    const useJson = json && json.checked;
    card.querySelectorAll("[data-config-for]").forEach(function (panel) {
      panel.hidden = useJson || panel.dataset.configFor !== select.value;
    });
    const mode = card.querySelector("[data-config-mode]");
    if (mode) mode.value = useJson ? "json" : "form";
    showNextRow(card);
  }
  function initCard(card) {
    if (card.dataset.ready) return;
    card.dataset.ready = "1";
    const keyInput = card.querySelector("[data-step-key]");
    if (keyInput && keyInput.value) keyInput.dataset.prev = keyInput.value.trim();
    const select = card.querySelector("[data-action-type]");
    if (select) select.addEventListener("change", function () { showConfig(card); refreshChoices(); });
    const json = card.querySelector("[data-use-json]");
    if (json) json.addEventListener("change", function () { showConfig(card); });
    card.querySelector("[data-move=up]")?.addEventListener("click", function () {
      let prev = card.previousElementSibling;
      while (prev && prev.dataset.removed) prev = prev.previousElementSibling;
      if (prev) { prev.before(card); renumber(); refreshChoices(); card.querySelector("[data-move=up]").focus(); }
    });
    card.querySelector("[data-move=down]")?.addEventListener("click", function () {
      let next = card.nextElementSibling;
      while (next && next.dataset.removed) next = next.nextElementSibling;
      if (next) { next.after(card); renumber(); refreshChoices(); card.querySelector("[data-move=down]").focus(); }
    });
    card.querySelector("[data-remove-step]")?.addEventListener("click", function () {
      const del = card.querySelector('input[name$="-DELETE"]');
      if (del) del.checked = true;
      card.dataset.removed = "1";
      card.hidden = true;
      renumber();
      refreshChoices();
    });
    // Drag and drop: only from the handle, so text in the fields can still be selected.
    const handle = card.querySelector("[data-drag-handle]");
    if (handle) {
      handle.addEventListener("mousedown", function () { card.draggable = true; });
      card.addEventListener("dragstart", function (event) {
        card.classList.add("relay-dragging");
        event.dataTransfer.effectAllowed = "move";
        event.dataTransfer.setData("text/plain", card.dataset.prefix || "");
      });
      card.addEventListener("dragend", function () {
        card.classList.remove("relay-dragging");
        card.draggable = false;
        renumber();
        refreshChoices();
      });
    }
    initPersonalize(card);
    initRows(card);
    initBlocks(card);
    initShowIf(card);
    initSmsCounter(card);
    initJsonCheck(card);
    initPreview(card);
    showConfig(card);
  }
  function initDropZone(list) {
    list.addEventListener("dragover", function (event) {
      const dragging = list.querySelector(".relay-dragging");
      if (!dragging) return;
      event.preventDefault();
      const after = [...list.querySelectorAll(":scope > [data-step]:not(.relay-dragging)")].find(function (card) {
        const box = card.getBoundingClientRect();
        return event.clientY < box.top + box.height / 2;
      });
      if (after) after.before(dragging); else list.appendChild(dragging);
    });
    list.addEventListener("drop", function (event) { event.preventDefault(); renumber(); });
  }
  function addStep(actionType) {
    const template = document.querySelector("[data-step-template]");
    const total = totalForms();
    const list = document.querySelector("[data-steps]");
    if (!template || !total || !list) return;
    const index = parseInt(total.value, 10);
    // A copy of the empty card's nodes with __prefix__ replaced in their attributes: the page's markup is
    // never serialised and parsed again (the card carries the account's tags and custom field names).
    const card = template.content.firstElementChild.cloneNode(true);
    [card, ...card.querySelectorAll("*")].forEach(function (node) {
      for (const attribute of [...node.attributes]) {
        if (attribute.value.includes("__prefix__")) attribute.value = attribute.value.replace(/__prefix__/g, String(index));
      }
    });
    list.appendChild(card);
    total.value = String(index + 1);
    const select = card.querySelector("[data-action-type]");
    select.value = actionType;
    const key = card.querySelector("[data-step-key]");
    if (key && !key.value) key.value = nextStepKey();
    if (key) key.dataset.prev = key.value;
    initCard(card);
    renumber();
    refreshChoices();
    updateSplits();
    card.scrollIntoView({ block: "center", behavior: "smooth" });
    const first = card.querySelector("[data-config-for='" + actionType + "'] input:not([type=hidden]):not([type=radio]), [data-config-for='" + actionType + "'] textarea");
    (first || card.querySelector("input[name$=-name]")).focus();
  }

  // --- preview and test send ----------------------------------------------------------------
  function stepData(card) {
    const data = new FormData();
    card.querySelectorAll("input, select, textarea").forEach(function (el) {
      if (!el.name || el.disabled) return;
      if ((el.type === "checkbox" || el.type === "radio") && !el.checked) return;
      data.append(el.name, el.value);
    });
    data.append("step_prefix", card.dataset.prefix);
    const account = document.querySelector("select[name=account]");
    data.append("account", account && account.value ? account.value : (config.accountId || ""));
    data.append("csrfmiddlewaretoken", csrf());
    return data;
  }
  // The preview's answer is data (JSON) and is shown as text, never parsed as markup: a contact's name such as
  // <img src=x onerror=...> reads as those characters. The email's HTML part, sanitised on the server (nh3),
  // goes into a frame sandboxed with no permission at all (no script, no same-origin access): two fences.
  function element(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function showPreview(result, answer) {
    result.replaceChildren();
    const problems = answer.problems || [];
    if (problems.length || !answer.preview) {
      const box = element("div", "relay-preview-problems");
      box.setAttribute("role", "alert");
      (problems.length ? problems : ["Nothing to preview."]).forEach(function (p) { box.appendChild(element("p", "", p)); });
      result.appendChild(box);
      return;
    }
    const p = answer.preview;
    const box = element("div", "relay-preview");
    box.dataset.testid = "preview";
    box.appendChild(element("p", "relay-preview-for", "As " + p.contact_label + " would see it:"));
    if (p.shape === "email") {
      const list = element("dl");
      list.appendChild(element("dt", "", "Subject"));
      const subject = element("dd", "", p.subject);
      subject.setAttribute("data-preview-subject", "");
      list.appendChild(subject);
      box.appendChild(list);
      const tabs = element("div", "relay-preview-tabs");
      if (p.html) {
        const frame = element("iframe", "relay-preview-frame");
        frame.setAttribute("sandbox", "");  // before any content: nothing in the frame may run
        frame.setAttribute("referrerpolicy", "no-referrer");
        frame.title = "The email as HTML";
        frame.srcdoc = p.html;
        tabs.appendChild(frame);
      }
      const text = element("pre", "relay-preview-text", p.text);
      text.setAttribute("data-preview-text", "");
      tabs.appendChild(text);
      box.appendChild(tabs);
    } else if (p.shape === "sms") {
      const bubble = element("div", "relay-sms-bubble", p.sms);
      bubble.setAttribute("data-preview-sms", "");
      box.appendChild(bubble);
      box.appendChild(element("p", "help", p.sms_length + " characters"));
    } else {
      box.appendChild(element("p", "", p.voice_message ? "Read aloud: “" + p.voice_message + "”" : "Plays " + p.recording_url));
    }
    result.appendChild(box);
  }
  function initPreview(card) {
    card.querySelectorAll("[data-preview]").forEach(function (box) {
      const result = box.querySelector("[data-preview-result]");
      const contact = box.querySelector("[data-preview-contact]");
      box.querySelector("[data-preview-button]").addEventListener("click", function () {
        const data = stepData(card);
        data.append("contact", contact.value);
        result.textContent = "Rendering…";
        fetch(config.previewUrl, { method: "POST", body: data, credentials: "same-origin" })
          .then(function (r) {
            if (!r.ok) throw new Error("status " + r.status);
            return r.json();
          })
          .then(function (answer) { showPreview(result, answer); })
          .catch(function () { result.textContent = "The preview could not be loaded."; });
      });
      box.querySelector("[data-send-test]").addEventListener("click", function () {
        const data = stepData(card);
        data.append("contact", contact.value);
        data.append("to", box.querySelector("[data-test-to]").value);
        result.textContent = "Sending…";
        fetch(config.sendTestUrl, { method: "POST", body: data, credentials: "same-origin" })
          .then(function (r) { return r.json(); })
          .then(function (answer) {
            result.replaceChildren();
            const p = document.createElement("p");
            p.className = answer.ok ? "relay-ok" : "relay-bad";
            p.textContent = answer.message;
            result.appendChild(p);
          })
          .catch(function () { result.textContent = "The test could not be sent."; });
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-steps] > [data-step]").forEach(initCard);
    const list = document.querySelector("[data-steps]");
    if (list) initDropZone(list);
    document.querySelectorAll("[data-add-step]").forEach(function (button) {
      button.addEventListener("click", function () { addStep(button.dataset.addStep); });
    });
    // The workflow's own fields (outside the steps): condition rows, tags, personalisation.
    const form = document.querySelector("#content-main form");
    if (form) {
      form.querySelectorAll("fieldset.module:not(.relay-steps-module)").forEach(function (fs) { initRows(fs); initBlocks(fs); initPersonalize(fs); });
    }
    initTrigger();
    renumber();
    refreshChoices();
    updateSplits();
  });
})();
