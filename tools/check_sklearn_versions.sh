#!/usr/bin/env bash
# Run the tests against the oldest and the newest supported scikit-learn.
#
#   bash tools/check_sklearn_versions.sh            # the compatibility subset
#   bash tools/check_sklearn_versions.sh --full     # the whole suite (long)
#   bash tools/check_sklearn_versions.sh -- -k lag  # extra pytest arguments after --
#
# For each version it makes (or reuses) a virtual environment (OLD_VENV, default
# /tmp/sk16; NEW_VENV, default /tmp/sknew), installs that scikit-learn and this checkout
# in editable mode with its test extras, and runs pytest from the checkout. The newest
# is whatever `pip install --upgrade scikit-learn` gives. OLDEST must match the floor
# in pyproject.toml. Exits non-zero if any run fails.
set -euo pipefail

OLDEST="${OLDEST:-1.6.1}"
PYTHON="${PYTHON:-python3}"
OLD_VENV="${OLD_VENV:-/tmp/sk16}"
NEW_VENV="${NEW_VENV:-/tmp/sknew}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

SUBSET=(
    tests/test_compat.py
    tests/test_common.py
    tests/test_contracts.py
    tests/test_metrics.py
    tests/test_sample_weight.py
    sklearn_orfit/_compat.py
    sklearn_orfit/utils
    sklearn_orfit/metrics.py
)
TARGETS=("${SUBSET[@]}")
EXTRA=()
while (($#)); do
    case "$1" in
        --full) TARGETS=(); shift ;;
        --) shift; EXTRA=("$@"); break ;;
        *) echo "unknown argument: $1 (use --full, or -- PYTEST_ARGS)" >&2; exit 2 ;;
    esac
done

run() {  # run VENV PIP_REQUIREMENT
    local venv="$1"
    if [[ ! -x "$venv/bin/python" ]]; then
        "$PYTHON" -m venv "$venv"
    fi
    "$venv/bin/python" -m pip install --quiet --upgrade "$2"
    "$venv/bin/python" -m pip install --quiet -e "$ROOT[test]"
    # pip may have moved scikit-learn while installing the package: put it back
    "$venv/bin/python" -m pip install --quiet "$2"
    local version
    version="$("$venv/bin/python" -c 'import sklearn; print(sklearn.__version__)')"
    echo "=== scikit-learn $version ($venv)"
    (cd "$ROOT" && "$venv/bin/python" -m pytest -q -p no:cacheprovider \
        "${TARGETS[@]}" "${EXTRA[@]}")
}

status=0
run "$OLD_VENV" "scikit-learn==$OLDEST" || status=1
run "$NEW_VENV" "scikit-learn" || status=1
exit $status
