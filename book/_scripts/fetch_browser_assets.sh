#!/usr/bin/env bash
# Put the browser files the book needs offline into book/_offline (listed in html_static_path):
# MathJax 3, require.js and the ipywidgets HTML manager, from the npm registry (pinned versions).
# By default a built page would load them from CDNs, and opened offline it shows raw TeX and no
# widgets. Idempotent: does nothing when the pinned versions are already there.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dest="$here/_offline"
stamp="$dest/.versions"
want="mathjax@3.2.2 requirejs@2.3.8 @jupyter-widgets/html-manager@1.0.15"
ours() {  # our own files: always current, in book/_offline and in an already built book (Sphinx
  # copies static files only when it rewrites a page, so an edited stylesheet alone never arrived)
  cp "$here/_scripts/require-config.js" "$here/_scripts/book.css" "$1/"
  if [ -d "$here/_build/html/_static" ]; then
    cp "$here/_scripts/require-config.js" "$here/_scripts/book.css" "$here/_build/html/_static/"
  fi
}
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  ours "$dest"
  echo "browser assets up to date ($want)"; exit 0
fi
command -v npm >/dev/null || { echo "npm is needed to fetch the book's browser assets (MathJax, require.js, widget manager)" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent $want >/dev/null)
for f in "$tmp"/*.tgz; do d="$tmp/$(basename "$f" .tgz)"; mkdir -p "$d"; tar xzf "$f" -C "$d"; done
new="$tmp/_offline"; mkdir -p "$new/jupyter-widgets"
cp -r "$tmp"/mathjax-*/package/es5 "$new/mathjax"
rm -rf "$new/mathjax/sre"   # speech-rule engine: 10 MB, only for the accessibility menu's speech output
cp "$tmp"/requirejs-*/package/require.js "$new/require.js"
cp "$tmp"/jupyter-widgets-html-manager-*/package/dist/embed-amd.js "$new/jupyter-widgets/"
cp "$tmp"/jupyter-widgets-html-manager-*/package/dist/*.{woff,woff2,ttf,eot,svg} "$new/jupyter-widgets/"
echo "$want" > "$new/.versions"
ours "$new"
rm -rf "$dest"; mv "$new" "$dest"
echo "browser assets fetched into book/_offline ($want)"
