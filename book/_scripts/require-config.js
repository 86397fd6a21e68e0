// The ipywidgets HTML manager resolves its icon fonts against the require.js module URI, which by
// default is relative to the page; point it at the copy served from the book's own static folder.
(function () {
  var here = document.currentScript.src;
  var base = here.slice(0, here.lastIndexOf("/") + 1);
  require.config({ paths: { "@jupyter-widgets/html-manager/dist": base + "jupyter-widgets" } });
})();
