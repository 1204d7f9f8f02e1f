#!/usr/bin/env bash
# Slurm Epilog= (see docs/prolog.md): after each job, ends what the job left behind, then looks at
# the job's GPUs:
#   - a process of the job still running (started with setsid or nohup, it escapes a process
#     tracking without cgroups) gets SIGTERM, then SIGKILL TOPODOCTOR_EPILOG_GRACE seconds later;
#     a process of the job is one whose environment holds the job's SLURM_JOB_ID or whose cgroup is
#     the job's, owned by the job's user;
#   - a process still on one of the job's GPUs after that (TD511: stuck in the driver, or started
#     outside any job) drains the node with topodoctor's line, as the next job's prolog would; the
#     health check resumes the node once no process is left on an idle node.
# It always exits 0: a failing epilog makes Slurm drain the node with "Epilog error", hiding ours.
# Settings: topodoctor.conf, then topodoctor-epilog.conf, beside this script (shell variables).
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
TOPODOCTOR=/usr/local/bin/topodoctor
TOPODOCTOR_ARGS=""                 # only where the host comes from applies here (--replay, --sysfs-root)
TOPODOCTOR_LEFTOVER_TIMEOUT=5      # the budget of the look at the job's GPUs, seconds
TOPODOCTOR_EPILOG_GRACE=5          # seconds between SIGTERM and SIGKILL for what the job left
TOPODOCTOR_LOG=""                  # a file that also gets every log line; syslog always does
here=$(dirname "$0")
for conf in "$here/topodoctor.conf" "$here/topodoctor-epilog.conf"; do
  # shellcheck source=/dev/null
  [ -r "$conf" ] && { set -a; . "$conf"; set +a; }
done
node=${SLURMD_NODENAME:-$(hostname -s)}
job=${SLURM_JOB_ID:-}

log() {
  local msg="epilog[$$] node=$node job=${job:--}: $*"
  logger -t topodoctor -- "$msg" 2>/dev/null
  [ -n "$TOPODOCTOR_LOG" ] && echo "$(date +%FT%T.%N) $msg" >>"$TOPODOCTOR_LOG"
  return 0
}
[[ "$job" =~ ^[0-9]+$ ]] || { log "no SLURM_JOB_ID: nothing to clean"; exit 0; }

# The job's processes still running: its SLURM_JOB_ID in their environment or its cgroup, the job's
# user's, never this script's own process group, Slurm's daemons or a process of another user.
own_group=$(sed 's/.*) //' /proc/$$/stat | cut -d' ' -f3)
leftovers() {
  local file pid stat uid
  {
    grep -lzx "SLURM_JOB_ID=$job" /proc/[0-9]*/environ
    grep -lE "/job_$job(/|$)" /proc/[0-9]*/cgroup
  } 2>/dev/null | while IFS= read -r file; do
    pid=${file#/proc/}
    pid=${pid%%/*}
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
    [ "$(cut -d' ' -f3 <<<"${stat##*) }")" = "$own_group" ] && continue
    case "${stat#*(}" in slurmstepd\)* | slurmd\)* | slurmctld\)*) continue ;; esac
    uid=$(sed -n 's/^Uid:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$pid/status" 2>/dev/null)
    [ -n "${SLURM_JOB_UID:-}" ] && [ "$uid" != "$SLURM_JOB_UID" ] && continue
    echo "$pid"
  done | sort -un
}

left=$(leftovers)
if [ -n "$left" ]; then
  shown=""
  for p in $left; do
    cmd=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-60)
    shown+="${shown:+, }pid $p (${cmd% })"
  done
  # shellcheck disable=SC2086  # one pid a word
  kill -TERM $left 2>/dev/null
  # The grace is wall time: a look at /proc takes longer on a node with many processes, and a count
  # of rounds would stretch with it.
  end=$(($(date +%s%N) + TOPODOCTOR_EPILOG_GRACE * 1000000000))
  while :; do
    left=$(leftovers)
    [ -z "$left" ] && break
    [ "$(date +%s%N)" -ge "$end" ] && break
    sleep 0.1
  done
  # shellcheck disable=SC2086
  [ -n "$left" ] && kill -KILL $left 2>/dev/null && sleep 0.2
  log "ended what the job left running: $shown${left:+ (SIGKILL for ${left//$'\n'/ })}"
fi

# A job without a GPU list shares the node's GPUs with other jobs: nothing here is its to judge.
[ -n "${SLURM_JOB_GPUS:-}" ] || exit 0
source=()
# shellcheck disable=SC2206  # TOPODOCTOR_ARGS is a list of words on purpose
words=($TOPODOCTOR_ARGS)
for i in "${!words[@]}"; do
  case "${words[$i]}" in
    --replay=* | --sysfs-root=*) source+=("${words[$i]}") ;;
    --replay | --sysfs-root) source+=("${words[$i]}" "${words[$((i + 1))]}") ;;
  esac
done
# In this script's process group (timeout --foreground), where Slurm's kill at PrologEpilogTimeout
# reaches it.
line=$(timeout --foreground -k 2 $((TOPODOCTOR_LEFTOVER_TIMEOUT + 5)) "$TOPODOCTOR" check --format line \
  --scope auto --prolog --select TD511 --timeout "$TOPODOCTOR_LEFTOVER_TIMEOUT" "${source[@]}" 2>&1)
rc=$?
line=${line//$'\n'/ }
line=${line:0:200}
if [ $rc -ne 1 ]; then
  [ $rc -eq 0 ] || log "could not look at the job's GPUs (exit $rc): $line"
  exit 0
fi
if ! info=$(scontrol show node "$node" 2>&1); then
  log "cannot read $node from slurmctld (${info//$'\n'/ }); not drained: $line"
  exit 0
fi
reason=$(sed -n 's/^[[:space:]]*Reason=\(.*\) \[[^]]*\][[:space:]]*$/\1/p' <<<"$info" | head -n1)
# A check's own reason may be replaced; anyone else's, the fleet's ("topodoctor: TD951 ...") too, is kept.
if [ -n "$reason" ] && [[ "$reason" != "topodoctor FAIL"* && "$reason" != "topodoctor UNKNOWN"* ]]; then
  log "already drained by someone else ($reason); not replacing it with: $line"
else
  scontrol update nodename="$node" state=drain reason="$line" && log "drained: $line"
fi
exit 0
