// queuey dashboard: the only script. Pages work without it; it only saves a click.
// Choosing a queue in the job-list filter applies the filter at once.
document.addEventListener("change", function (event) {
  var target = event.target;
  if (target instanceof HTMLSelectElement && target.hasAttribute("data-queue-select")) {
    target.form.submit();
  }
});
