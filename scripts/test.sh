#!/usr/bin/env bash
# The whole test suite from a fresh clone: create .venv with Parley and its test extras,
# create .venv-sdk03 with the last 0.3 release of the official a2a-sdk (it cannot be
# installed beside 1.x; the interoperability tests drive it as a subprocess), then run
# pytest. Used by the README and by .ci/run; extra arguments go to pytest.
# pytest includes tests/shipped, which tests the product as a user gets it: it builds the sdist and
# the wheel (`python -m build`, the dev extra), installs the wheel into fresh venvs outside the checkout
# (no extras, then each extra; cached by the wheel's hash under $TMPDIR/parley-shipped) and runs the
# installed `parley` there (docs/install.md, "How this is tested").
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,bench]'
if ! .venv-sdk03/bin/python -c "import importlib.metadata as m, uvicorn; assert m.version('a2a-sdk') == '0.3.26'" 2>/dev/null; then
  rm -rf .venv-sdk03
  "$PY" -m venv .venv-sdk03
  .venv-sdk03/bin/python -m pip install -q --disable-pip-version-check "a2a-sdk[http-server]==0.3.26" uvicorn
fi
exec .venv/bin/python -m pytest "$@"
