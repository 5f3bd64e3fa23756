// The submit form's editor: CodeMirror 6 over the form's textarea, which
// stays the form's field (the page works without this script). Bundled by
// `make web` into ../static/editor.js; no request leaves the box.
import { basicSetup } from "codemirror";
import { EditorView, keymap } from "@codemirror/view";
import { indentWithTab } from "@codemirror/commands";
import { python } from "@codemirror/lang-python";
import { cpp } from "@codemirror/lang-cpp";

function language(area) {
  return area.dataset.lang === "cu" ? cpp() : python();
}

function attach(area) {
  // CodeMirror writes its styles into <style> elements: the page's CSP
  // admits them by the nonce the server put on the page.
  const nonce = document.querySelector('meta[name="csp-nonce"]')?.content || "";
  const view = new EditorView({
    doc: area.value,
    extensions: [
      basicSetup,
      keymap.of([indentWithTab]),
      language(area),
      EditorView.cspNonce.of(nonce),
      EditorView.contentAttributes.of({ "aria-label": "code" }),
      EditorView.updateListener.of((u) => {
        if (u.docChanged) area.value = u.state.doc.toString();
      }),
    ],
  });
  area.insertAdjacentElement("afterend", view.dom);
  area.hidden = true;
  area.dataset.editor = "codemirror";
  // Tests and scripts that fill the textarea directly reach the editor too.
  area.addEventListener("input", () => {
    if (area.value !== view.state.doc.toString()) {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: area.value } });
    }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("textarea.code[data-editor-wanted]").forEach(attach);
});
