#!/usr/bin/env bash
# Slurm HealthCheckProgram= (see docs/prolog.md): checks the whole node every HealthCheckInterval,
# on idle and busy nodes alike, and
#   exit 0 (healthy)            resumes the node if topodoctor drained it, else leaves it alone;
#   exit 1 (unhealthy)          drains it with topodoctor's one-line reason;
#   exit 2 (misconfigured)      logs the line and changes nothing (our files' fault, not the node's);
#   anything else (could not    drains it with "topodoctor UNKNOWN: ..." (a node that cannot be checked
#   check, killed, not found)   is not healthy; the next passing check resumes it).
# A process on a GPU of a node that runs no job is a previous job's leftover (TD511), as the prolog
# judges it: such a node is drained, and a node drained by topodoctor is resumed only once its jobs
# have ended and no process is left on its GPUs.
# A drain someone else made (its reason is not a check's "topodoctor FAIL/UNKNOWN") is never replaced or
# resumed; the fleet's ("topodoctor: TD95x ...", a lemon or a flapping fault) waits for a person.
# Settings: topodoctor.conf, then topodoctor-health.conf, beside this script (shell variables; see
# docs/prolog.md). slurmd runs this with no PATH and nothing else but SLURMD_NODENAME, so nothing is
# taken from the environment.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
TOPODOCTOR=/usr/local/bin/topodoctor
TOPODOCTOR_ARGS=""                 # more options for `topodoctor check`, e.g. --ignore nccl-nvls-disabled
TOPODOCTOR_EXPECT=""               # the node type's expectations file, once written (topodoctor expect -o)
TOPODOCTOR_TIMEOUT=20              # the check's budget, seconds; slurmd kills this program at 60
TOPODOCTOR_LEFTOVER_TIMEOUT=5      # the budget of the look for leftover processes on an idle node
TOPODOCTOR_METRICS_DIR=""          # node_exporter's textfile directory; empty: no metrics
TOPODOCTOR_LOCK=/run/topodoctor-healthcheck.lock
TOPODOCTOR_LOG=""                  # a file that also gets every log line; syslog always does
here=$(dirname "$0")
for conf in "$here/topodoctor.conf" "$here/topodoctor-health.conf"; do
  # shellcheck source=/dev/null
  [ -r "$conf" ] && { set -a; . "$conf"; set +a; }
done
node=${SLURMD_NODENAME:-$(hostname -s)}

# Every line names the script, the node and the job (none: the node's own check).
log() {
  local msg="healthcheck[$$] node=$node job=-: $*"
  logger -t topodoctor -- "$msg" 2>/dev/null
  [ -n "$TOPODOCTOR_LOG" ] && echo "$(date +%FT%T.%N) $msg" >>"$TOPODOCTOR_LOG"
  return 0
}

# Run a check in this script's process group, where slurmd's kill reaches it (timeout --foreground:
# a timeout(1) of its own group would outlive it), and pass a signal sent to this script alone on to
# it: nothing runs or writes after we are gone. $1: the budget; sets $line (one line, at most 200
# characters) and $rc.
check() {
  local budget=$1 fd pid part
  shift
  exec {fd}< <(exec timeout --foreground -k 2 $((budget + 5)) "$TOPODOCTOR" "$@" 2>&1)
  pid=$!
  trap 'kill -TERM "$pid" 2>/dev/null; wait "$pid"; log "terminated: the check was stopped; nothing changed"; exit 0' \
    TERM INT HUP
  line=""
  while IFS= read -r part <&"$fd"; do line+="${line:+ }$part"; done
  exec {fd}<&-
  wait "$pid"
  rc=$?
  trap - TERM INT HUP
  case "$line" in topodoctor*) ;; *) line="topodoctor UNKNOWN: check exited $rc: ${line:0:120}" ;; esac
  line=${line:0:200}
}

# Drain with $1, unless someone else drained the node (their reason is kept) or it already says $1.
drain() {
  if [ "$held" -eq 1 ]; then
    log "kept drained by the fleet ($reason); a person resumes it; this check says: $1"
  elif [ -n "$reason" ] && [ "$ours" -eq 0 ]; then
    log "already drained by someone else ($reason); not replacing it with: $1"
  elif [ "$drained" -eq 0 ] || [ "$1" != "$reason" ]; then
    scontrol update nodename="$node" state=drain reason="$1" && log "drained: $1"
  fi
}

# One check at a time: with HealthCheckInterval shorter than a check, slurmd starts the next run
# while this one is still going, and a stale run would drain a node a newer one had resumed.
exec 9>>"$TOPODOCTOR_LOCK" || { log "cannot open lock $TOPODOCTOR_LOCK"; exit 0; }
flock -n 9 || { log "skipped: the previous check is still running"; exit 0; }

args=(check --format line --scope node --timeout "$TOPODOCTOR_TIMEOUT")
[ -n "$TOPODOCTOR_EXPECT" ] && args+=(--expect "$TOPODOCTOR_EXPECT")
[ -n "$TOPODOCTOR_METRICS_DIR" ] && args+=(--metrics "$TOPODOCTOR_METRICS_DIR/topodoctor-check.prom")
# shellcheck disable=SC2206  # TOPODOCTOR_ARGS is a list of words on purpose
args+=($TOPODOCTOR_ARGS)
log "start"
check "$TOPODOCTOR_TIMEOUT" "${args[@]}"

# With slurmctld down this fails after about 30 s, and nothing can be drained or resumed.
info=$(scontrol show node "$node" 2>&1) || { log "cannot read $node from slurmctld: ${info//$'\n'/ }"; exit 0; }
state=$(sed -n 's/.*[[:space:]]State=\([^[:space:]]*\).*/\1/p' <<<"$info" | head -n1)
reason=$(sed -n 's/^[[:space:]]*Reason=\(.*\) \[[^]]*\][[:space:]]*$/\1/p' <<<"$info" | head -n1)
drained=0
[[ "$state" == *DRAIN* || "$state" == DOWN* ]] && drained=1
# Ours to resume: the reasons a check writes ("topodoctor FAIL ...", "topodoctor UNKNOWN: ...").
# The fleet's ("topodoctor: TD951 lemon-node ...", its judgement over time: a lemon, a flapping
# fault) needs a person: it is kept, never replaced by a check's line nor resumed by a passing one.
ours=0
[[ "$reason" == "topodoctor FAIL"* || "$reason" == "topodoctor UNKNOWN"* ]] && ours=1
held=0
[[ "$reason" == "topodoctor: "* ]] && held=1
idle=0  # no job on the node, none ending: any process on a GPU is a leftover
[[ "${state%%+*}" == IDLE || "${state%%+*}" == DOWN ]] && [[ "$state" != *COMPLETING* ]] && idle=1

verdict=$line verdict_rc=$rc
case $rc in
  0)
    if [ $idle -eq 1 ]; then
      # The prolog's judgement of a process on a GPU, on every GPU: no job runs here to own one.
      # Of TOPODOCTOR_ARGS only where the host comes from (--replay, --sysfs-root) applies.
      source=()
      # shellcheck disable=SC2206  # TOPODOCTOR_ARGS is a list of words on purpose
      words=($TOPODOCTOR_ARGS)
      for i in "${!words[@]}"; do
        case "${words[$i]}" in
          --replay=* | --sysfs-root=*) source+=("${words[$i]}") ;;
          --replay | --sysfs-root) source+=("${words[$i]}" "${words[$((i + 1))]}") ;;
        esac
      done
      check "$TOPODOCTOR_LEFTOVER_TIMEOUT" check --format line --scope node --prolog --select TD511 \
        --timeout "$TOPODOCTOR_LEFTOVER_TIMEOUT" "${source[@]}"
      if [ "$rc" -ne 0 ] && [ "$rc" -ne 2 ]; then
        drain "$line"
      elif [ $drained -eq 1 ] && [ $ours -eq 1 ]; then
        scontrol update nodename="$node" state=resume && log "resumed: $verdict"
      elif [ $drained -eq 1 ] && [ $held -eq 1 ]; then
        log "kept drained by the fleet ($reason); a person resumes it once its cause is found: $verdict"
      fi
    elif [ $drained -eq 1 ] && [ $held -eq 1 ]; then
      log "kept drained by the fleet ($reason); a person resumes it once its cause is found: $verdict"
    elif [ $drained -eq 1 ] && [ $ours -eq 1 ]; then
      if [[ "$reason" == "topodoctor FAIL TD511"[:\ ]* ]]; then
        log "kept drained until its jobs end and no process is left on its GPUs ($state): $reason"
      else
        scontrol update nodename="$node" state=resume && log "resumed: $verdict"
      fi
    fi ;;
  2)
    log "misconfigured (exit 2), nothing changed: $verdict" ;;
  *)
    drain "$verdict" ;;
esac
log "end rc=$verdict_rc"
exit 0
