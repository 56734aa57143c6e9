# Shared by scripts/demo and scripts/test: a virtualenv in .venv with the project installed.
# Sourced, not run.

# ensure_venv <extras>: .venv with queuey installed (editable) with those extras ("" or "[dev]").
# A stamp in .venv records each install; while it is newer than pyproject.toml nothing is
# reinstalled (the install is editable: source changes need none), so a warm run costs nothing.
fresh() { [ -f "$1" ] && [ "$1" -nt pyproject.toml ]; }

ensure_venv() {
    local extras="$1"
    local stamp=".venv/.installed${extras:+-${extras//[^a-z]/}}"
    if [ -x .venv/bin/python ] && { fresh "$stamp" || { [ -z "$extras" ] && fresh .venv/.installed-dev; }; }; then
        return  # installed since pyproject.toml last changed (a dev install includes the plain one)
    fi
    if [ ! -x .venv/bin/python ]; then
        echo "creating .venv and installing queuey${extras} into it (the first time takes a minute or two)" >&2
        if ! python3 -m venv .venv 2>/dev/null; then
            echo "python3 -m venv failed; installing python3-venv with apt" >&2
            rm -rf .venv
            $SUDO apt-get update -qq && $SUDO apt-get install -y -qq python3-venv >/dev/null
            python3 -m venv .venv
        fi
        .venv/bin/python -m pip install -q --upgrade pip
    else
        echo "installing queuey${extras} into .venv (pyproject.toml changed, or first install of these extras)" >&2
    fi
    .venv/bin/python -m pip install -q -e ".${extras}"
    touch "$stamp"
}

SUDO=""
if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null; then SUDO="sudo"; fi
