"""Tests of slime's launch scripts (scripts/run_*.sh, scripts/lib/tau_launch.sh) against our servers."""
