#!/usr/bin/env bash
# Slurm Prolog= (see docs/prolog.md): checks the job's GPUs before the job starts, and
#   exit 0 (healthy)            the job runs;
#   exit 1 (unhealthy)          drains the node with topodoctor's one-line reason; the job does not run
#                               here (Slurm requeues a batch job, refuses an srun);
#   exit 2 (misconfigured)      logs the line; the job runs (our files' fault, not the node's: a real
#                               fault found without the expectations file is still exit 1);
#   anything else (could not    drains the node with "topodoctor UNKNOWN: ..."; the job does not run.
#   check, killed, not found)
# A previous job's process on one of the job's GPUs (TD511) is a fault: the node stays drained
# until the health check finds no process left on an idle node (healthcheck-drain.sh).
# Settings: topodoctor.conf, then topodoctor-prolog.conf, beside this script (shell variables).
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
TOPODOCTOR=/usr/local/bin/topodoctor
TOPODOCTOR_ARGS=""                 # more options for `topodoctor check`, e.g. --ignore nccl-nvls-disabled
TOPODOCTOR_EXPECT=""               # the node type's expectations file, once written (topodoctor expect -o)
TOPODOCTOR_TIMEOUT=20              # the check's budget, seconds: see "How the budgets fit" in prolog.md
TOPODOCTOR_METRICS_DIR=""          # node_exporter's textfile directory; empty: no metrics
TOPODOCTOR_LOG=""                  # a file that also gets every log line; syslog always does
here=$(dirname "$0")
for conf in "$here/topodoctor.conf" "$here/topodoctor-prolog.conf"; do
  # shellcheck source=/dev/null
  [ -r "$conf" ] && { set -a; . "$conf"; set +a; }
done
node=${SLURMD_NODENAME:-$(hostname -s)}

# Every line names the script, the node and the job, in syslog (tag topodoctor) and the log file.
log() {
  local msg="prolog[$$] node=$node job=${SLURM_JOB_ID:--}: $*"
  logger -t topodoctor -- "$msg" 2>/dev/null
  [ -n "$TOPODOCTOR_LOG" ] && echo "$(date +%FT%T.%N) $msg" >>"$TOPODOCTOR_LOG"
  return 0
}

# Run the check in this script's process group, where Slurm's signal at PrologEpilogTimeout
# reaches it (timeout --foreground: a timeout(1) of its own group would outlive the kill), and
# pass a signal sent to this script alone on to it: nothing runs or writes after we are gone.
# Sets $line (one line, at most 200 characters) and $rc.
check() {
  local fd pid part
  exec {fd}< <(exec timeout --foreground -k 2 $((TOPODOCTOR_TIMEOUT + 5)) "$TOPODOCTOR" "$@" 2>&1)
  pid=$!
  trap 'kill -TERM "$pid" 2>/dev/null; wait "$pid"; log "terminated: the check was stopped; nothing changed"; exit 1' \
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

# The job's GPUs only (SLURM_JOB_GPUS, set by Slurm for a job with --gres gpu): another job's broken
# GPU is not this job's business. A job Slurm gave no GPU list is judged on the whole node. Either
# way the metrics are the job's, in a file of their own (never the node's series).
args=(check --format line --scope auto --timeout "$TOPODOCTOR_TIMEOUT")
[ -n "$TOPODOCTOR_EXPECT" ] && args+=(--expect "$TOPODOCTOR_EXPECT")
[ -n "$TOPODOCTOR_METRICS_DIR" ] && args+=(--metrics "$TOPODOCTOR_METRICS_DIR/topodoctor-check-job.prom")
# shellcheck disable=SC2206  # TOPODOCTOR_ARGS is a list of words on purpose
args+=($TOPODOCTOR_ARGS)
check "${args[@]}"

case $rc in
  0) log "ok: $line"; exit 0 ;;
  2) log "misconfigured (exit 2), the job runs: $line"; exit 0 ;;
esac
# One scontrol call to read the node; with slurmctld down it fails after about 30 s and nothing is
# drained by us (Slurm drains the node with its own "Prolog error" once it hears of the failure).
if ! info=$(scontrol show node "$node" 2>&1); then
  log "cannot read $node from slurmctld (${info//$'\n'/ }); not drained by us, the job is refused: $line"
  exit 1
fi
reason=$(sed -n 's/^[[:space:]]*Reason=\(.*\) \[[^]]*\][[:space:]]*$/\1/p' <<<"$info" | head -n1)
# A check's own reason may be replaced; anyone else's, the fleet's ("topodoctor: TD951 ...") too, is kept.
if [ -n "$reason" ] && [[ "$reason" != "topodoctor FAIL"* && "$reason" != "topodoctor UNKNOWN"* ]]; then
  log "already drained by someone else ($reason); not replacing it with: $line"
else
  scontrol update nodename="$node" state=drain reason="$line" && log "drained: $line"
fi
exit 1
