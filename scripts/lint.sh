#!/usr/bin/env bash
# lint.sh -- fails on the C functions STYLE.md bans, anywhere in our C sources.
set -u
cd "$(dirname "$0")/.."
banned='\b(strcpy|strcat|sprintf|vsprintf|strncpy|strtok|atoi|sscanf|gets)[[:space:]]*\('
hits=$(grep -nE "$banned" server/*.c include/*.h tests/unit/*.c tests/unit/*.h tests/fuzz/*.c bench/*.c 2>/dev/null \
	| grep -vE '^\S+:[0-9]+:\s*(/?\*|//)' || true)
if [ -n "$hits" ]; then
	echo "lint: banned functions (use buf.h / strtoll with bounds / snprintf):"
	echo "$hits"
	echo "lint: FAIL"
	exit 1
fi
echo "lint: ok (no banned functions in $(ls server/*.c | wc -l) server sources)"
