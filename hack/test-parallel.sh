#!/usr/bin/env bash
# Runs the top-level tests of one Go test package in N processes at once, each
# test in its own process (the package's TestMain runs for each), and prints
# each test's result as it ends, the output of every failed test, and the
# slowest tests. The integration tests wait on the API server and the
# scheduler far more than they compute, and an in-process scheduler holds
# process-wide state (configz, metrics), so processes, not t.Parallel.
#
#   hack/test-parallel.sh <package dir> [jobs]      # jobs: PHALANX_TEST_JOBS, default 2
#
# Tests named in <package dir>/slow.txt (one per line; the slowest first) start
# first, so that the longest ones do not start last; every test the package
# lists runs, named there or not. Extra go test flags: PHALANX_TEST_FLAGS.
set -euo pipefail

pkg="${1:?package dir}"
jobs="${2:-${PHALANX_TEST_JOBS:-2}}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
name="$(basename "${pkg}")"
out="${root}/bin/test/${name}"
rm -rf "${out}"
mkdir -p "${out}/logs"
bin="${out}/${name}.test"

(cd "${root}" && go test -c -o "${bin}" "./${pkg}")

# Every test, slow ones first.
all="$(cd "${root}/${pkg}" && "${bin}" -test.list '^Test' | grep '^Test' | sort)"
slow=""
if [[ -f "${root}/${pkg}/slow.txt" ]]; then
  slow="$(grep -v '^#' "${root}/${pkg}/slow.txt" | grep -Fx -f <(echo "${all}") || true)"
fi
order="$( (echo "${slow}"; echo "${all}" | grep -vFx -f <(echo "${slow}") || true) | grep -v '^$')"
echo "${order}" >"${out}/order"
total="$(wc -l <"${out}/order")"
echo "${name}: ${total} tests in ${jobs} processes; logs in ${out#"${root}/"}/logs"

run_one() {
  local t="$1" start end rc
  start="$(date +%s)"
  rc=0
  # shellcheck disable=SC2086
  (cd "${ROOT}/${PKG}" && "${BIN}" -test.run "^${t}\$" -test.count=1 -test.v -test.timeout "${PHALANX_TEST_TIMEOUT:-30m}" ${PHALANX_TEST_FLAGS:-}) \
    >"${OUT}/logs/${t}.log" 2>&1 || rc=$?
  end="$(date +%s)"
  echo "${t} $((end - start))" >>"${OUT}/times"
  if [[ "${rc}" == 0 ]]; then
    printf 'ok    %-60s %4ds\n' "${t}" "$((end - start))"
  else
    echo "${t}" >>"${OUT}/failed"
    printf 'FAIL  %-60s %4ds\n' "${t}" "$((end - start))"
  fi
}
export -f run_one
export ROOT="${root}" PKG="${pkg}" BIN="${bin}" OUT="${out}"

start="$(date +%s)"
xargs -a "${out}/order" -P "${jobs}" -I{} bash -c 'run_one "$@"' _ {}
elapsed="$(($(date +%s) - start))"

echo "${name}: slowest tests (seconds):"
sort -k2 -n -r "${out}/times" | head -15 | sed 's/^/  /'
if [[ -s "${out}/failed" ]]; then
  while read -r t; do
    echo "=== output of ${t}"
    cat "${out}/logs/${t}.log"
  done <"${out}/failed"
  echo "${name}: FAILED in ${elapsed}s: $(tr '\n' ' ' <"${out}/failed")"
  exit 1
fi
if [[ "$(wc -l <"${out}/times")" != "${total}" ]]; then
  echo "${name}: only $(wc -l <"${out}/times") of ${total} tests ran" >&2
  exit 1
fi
echo "ok  ${name}: ${total} tests in ${elapsed}s"
