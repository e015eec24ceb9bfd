// "Copy" buttons next to short job ids copy the whole id to the clipboard.
document.addEventListener("click", function (event) {
  const button = event.target.closest("[data-copy]");
  if (!button) return;
  event.preventDefault();
  const text = button.dataset.copy;
  const done = function () {
    button.textContent = "✓";
    setTimeout(function () { button.textContent = "⧉"; }, 1200);
  };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done);
  } else {
    const area = document.createElement("textarea");
    area.value = text;
    document.body.appendChild(area);
    area.select();
    document.execCommand("copy");
    area.remove();
    done();
  }
});
