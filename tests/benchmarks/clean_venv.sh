#!/usr/bin/env bash
# A venv that holds topodoctor's dependencies alone, as `pipx install` or `uv tool install` would
# make it, built from the packages of the interpreter that runs this (the GPU hosts reach no
# package index): start-up measured there is topodoctor's own, without the site hooks an image's
# shared environment runs at every start.
#
#     bash tests/benchmarks/clean_venv.sh /tmp/tdv && /tmp/tdv/bin/python tests/benchmarks/startup.py 15
set -euo pipefail
dest=${1:?usage: clean_venv.sh DEST}
src=$(python3 -c "import pynvml, os; print(os.path.dirname(pynvml.__file__))")
python3 -m venv --without-pip "$dest"
purelib=$("$dest/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
# topodoctor's dependencies (pyproject.toml) and theirs
for p in pynvml.py typer click rich networkx prometheus_client shellingham typing_extensions.py annotated_doc \
    markdown_it mdurl pygments; do
    if [ -e "$src/$p" ]; then cp -r "$src/$p" "$purelib/"; fi
done
"$dest/bin/python" -m compileall -q "$purelib" >/dev/null
echo "$dest: $(ls "$purelib" | tr '\n' ' ')"
