# shellcheck shell=bash
# The trainer test steps' shared set-up (scripts/test_verl.sh, test_trl.sh, test_nemo_gym.sh): a venv of their own,
# kept between runs, with the trainer's pinned packages, this package [tau2,sglang,test], the --no-deps packages of
# every venv here (NO_DEPS_PINS) and the test tokenizers. Source it from the repository root; it needs bash.
# shellcheck source=scripts/lib/pip_install.sh
. scripts/lib/pip_install.sh

# trainer_venv DIR [PYTHON]: make the venv DIR with PYTHON (default python3) unless it exists, and activate it.
trainer_venv() {
    local venv=$1 python=${2:-python3}
    [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
    # shellcheck disable=SC1091
    . "$venv/bin/activate"
}

# trainer_install PKG...: the trainer's packages (and pip options) with this package's test extras, then the
# --no-deps packages and the test tokenizers.
trainer_install() {
    pip_install "$@" -e ".[tau2,sglang,test]"
    pip_install --no-deps "${NO_DEPS_PINS[@]}"
    bash scripts/fetch_test_tokenizers.sh
}
