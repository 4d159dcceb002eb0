# expect_failure NAME PATTERN ARGS...: `$bin train ARGS` fails with exit status 1 and exactly one stderr error line
# matching PATTERN, and leaves no output_dir; sets status=1 otherwise. Sourced by the bad-input tests, which define
# bin, work and status.
expect_failure() {
  local name=$1 pattern=$2
  shift 2
  local out=$work/$name
  "$bin" train "$@" --set "training.output_dir=$out" >"$work/$name.stdout" 2>"$work/$name.stderr"
  local rc=$?
  local errors
  errors=$(grep -c '^megatrain: error: ' "$work/$name.stderr")
  if [[ $rc -ne 1 ]] || [[ $errors -ne 1 ]] || ! grep -q -- "$pattern" "$work/$name.stderr" || [[ -e $out ]]; then
    echo "FAIL $name: rc=$rc, stderr:"; cat "$work/$name.stderr"; status=1
  else
    echo "ok   $name: $(grep '^megatrain: error: ' "$work/$name.stderr")"
  fi
}
