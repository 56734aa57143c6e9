# Shared by scripts/demo and scripts/test: a virtualenv in .venv with the project installed.
# Sourced, not run.

ensure_venv() {
    local extras="$1"
    if [ ! -x .venv/bin/python ]; then
        if ! python3 -m venv .venv 2>/dev/null; then
            echo "python3 -m venv failed; installing python3-venv with apt" >&2
            rm -rf .venv
            $SUDO apt-get update -qq && $SUDO apt-get install -y -qq python3-venv >/dev/null
            python3 -m venv .venv
        fi
        .venv/bin/python -m pip install -q --upgrade pip
    fi
    .venv/bin/python -m pip install -q -e ".${extras}"
}

SUDO=""
if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null; then SUDO="sudo"; fi
