#!/usr/bin/env bash
# Slurm HealthCheckProgram= (see docs/prolog.md): checks the whole node every HealthCheckInterval,
# on idle and busy nodes alike, and
#   exit 0 (healthy)            resumes the node if topodoctor drained it, else leaves it alone;
#   exit 1 (unhealthy)          drains it with topodoctor's one-line reason;
#   exit 2 (misconfigured)      logs the line and changes nothing (our files' fault, not the node's);
#   anything else (could not    drains it with "topodoctor UNKNOWN: ..." (a node that cannot be checked
#   check, killed, not found)   is not healthy; the next passing check resumes it).
# A drain someone else made (its reason does not start with "topodoctor") is never replaced or resumed.
# Settings: topodoctor.conf beside this script (shell variables; see docs/prolog.md). slurmd runs this
# with no PATH and nothing else but SLURMD_NODENAME, so nothing is taken from the environment.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
TOPODOCTOR=/usr/local/bin/topodoctor
TOPODOCTOR_ARGS=""                 # more options for `topodoctor check`, e.g. --ignore nccl-nvls-disabled
TOPODOCTOR_EXPECT=""               # the node type's expectations file, once written (topodoctor expect -o)
TOPODOCTOR_TIMEOUT=20              # the check's budget, seconds; slurmd kills this program at 60
TOPODOCTOR_METRICS_DIR=""          # node_exporter's textfile directory; empty: no metrics
TOPODOCTOR_LOCK=/run/topodoctor-healthcheck.lock
TOPODOCTOR_LOG=""                  # a file that also gets every log line; syslog always does
conf="$(dirname "$0")/topodoctor.conf"
# shellcheck source=/dev/null
[ -r "$conf" ] && { set -a; . "$conf"; set +a; }
node=${SLURMD_NODENAME:-$(hostname -s)}

log() {
  logger -t topodoctor "$*" 2>/dev/null
  [ -n "$TOPODOCTOR_LOG" ] && echo "$(date +%FT%T.%N) healthcheck[$$] $*" >>"$TOPODOCTOR_LOG"
  return 0
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
# --format line prints one line for every outcome; timeout(1) is a last resort should the
# command itself not keep its budget (exit 124, or 137 after the -k grace).
line=$(timeout -k 2 $((TOPODOCTOR_TIMEOUT + 5)) "$TOPODOCTOR" "${args[@]}" 2>&1)
rc=$?
case "$line" in topodoctor*) ;; *) line="topodoctor UNKNOWN: check exited $rc: ${line:0:120}" ;; esac
line=${line//$'\n'/ }

info=$(scontrol show node "$node" 2>&1) || { log "scontrol show node $node failed: $info"; exit 0; }
state=$(sed -n 's/.*[[:space:]]State=\([^[:space:]]*\).*/\1/p' <<<"$info" | head -n1)
reason=$(sed -n 's/^[[:space:]]*Reason=\(.*\) \[[^]]*\][[:space:]]*$/\1/p' <<<"$info" | head -n1)
drained=0
[[ "$state" == *DRAIN* || "$state" == DOWN* ]] && drained=1
ours=0
[[ "$reason" == topodoctor* ]] && ours=1

case $rc in
  0)
    if [ $drained -eq 1 ] && [ $ours -eq 1 ]; then
      scontrol update nodename="$node" state=resume && log "resumed $node: $line"
    fi ;;
  2)
    log "misconfigured (exit 2), nothing changed on $node: $line" ;;
  *)
    if [ $drained -eq 1 ] && [ $ours -eq 0 ] && [ -n "$reason" ]; then
      log "$node already drained by someone else ($reason); not replacing it with: $line"
    else
      scontrol update nodename="$node" state=drain reason="$line" && log "drained $node: $line"
    fi ;;
esac
log "end rc=$rc"
exit 0
