#!/usr/bin/env bash
# Slurm Prolog= (see docs/prolog.md): checks the job's GPUs before the job starts, and
#   exit 0 (healthy)            the job runs;
#   exit 1 (unhealthy)          drains the node with topodoctor's one-line reason; the job does not run
#                               here (Slurm requeues a batch job, refuses an srun);
#   exit 2 (misconfigured)      logs the line; the job runs (our files' fault, not the node's: a real
#                               fault found without the expectations file is still exit 1);
#   anything else (could not    drains the node with "topodoctor UNKNOWN: ..."; the job does not run.
#   check, killed, not found)
# The health check (healthcheck-drain.sh) resumes a node that topodoctor drained once it passes; a
# drain someone else made is never replaced. Settings: topodoctor.conf beside this script.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
TOPODOCTOR=/usr/local/bin/topodoctor
TOPODOCTOR_ARGS=""                 # more options for `topodoctor check`, e.g. --ignore nccl-nvls-disabled
TOPODOCTOR_EXPECT=""               # the node type's expectations file, once written (topodoctor expect -o)
TOPODOCTOR_TIMEOUT=20              # the check's budget, seconds: below PrologEpilogTimeout and MessageTimeout
TOPODOCTOR_METRICS_DIR=""          # node_exporter's textfile directory; empty: no metrics
TOPODOCTOR_LOG=""                  # a file that also gets every log line; syslog always does
conf="$(dirname "$0")/topodoctor.conf"
# shellcheck source=/dev/null
[ -r "$conf" ] && { set -a; . "$conf"; set +a; }
node=${SLURMD_NODENAME:-$(hostname -s)}

log() {
  logger -t topodoctor "$*" 2>/dev/null
  [ -n "$TOPODOCTOR_LOG" ] && echo "$(date +%FT%T.%N) prolog[$$] job ${SLURM_JOB_ID:-?} $*" >>"$TOPODOCTOR_LOG"
  return 0
}

# The job's GPUs only (SLURM_JOB_GPUS, set by Slurm for a job with --gres gpu): another job's broken
# GPU is not this job's business. Its metrics go to a file of their own, never the node-wide one.
args=(check --format line --scope auto --timeout "$TOPODOCTOR_TIMEOUT")
[ -n "$TOPODOCTOR_EXPECT" ] && args+=(--expect "$TOPODOCTOR_EXPECT")
[ -n "$TOPODOCTOR_METRICS_DIR" ] && args+=(--metrics "$TOPODOCTOR_METRICS_DIR/topodoctor-check-job.prom")
# shellcheck disable=SC2206  # TOPODOCTOR_ARGS is a list of words on purpose
args+=($TOPODOCTOR_ARGS)
line=$(timeout -k 2 $((TOPODOCTOR_TIMEOUT + 5)) "$TOPODOCTOR" "${args[@]}" 2>&1)
rc=$?
case "$line" in topodoctor*) ;; *) line="topodoctor UNKNOWN: check exited $rc: ${line:0:120}" ;; esac
line=${line//$'\n'/ }

case $rc in
  0) log "ok: $line"; exit 0 ;;
  2) log "misconfigured (exit 2), the job runs: $line"; exit 0 ;;
esac
reason=$(scontrol show node "$node" 2>/dev/null | sed -n 's/^[[:space:]]*Reason=\(.*\) \[[^]]*\][[:space:]]*$/\1/p')
if [ -n "$reason" ] && [[ "$reason" != topodoctor* ]]; then
  log "$node already drained by someone else ($reason); not replacing it with: $line"
else
  scontrol update nodename="$node" state=drain reason="$line" && log "drained $node: $line"
fi
exit 1
