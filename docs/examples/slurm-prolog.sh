#!/usr/bin/env bash
# Slurm Prolog= script: check the node before the job starts. A non-zero exit makes Slurm
# drain the node and requeue the job; we also set a readable reason.
TOPODOCTOR=${TOPODOCTOR:-/usr/local/bin/topodoctor}
EXPECT=${TOPODOCTOR_EXPECT:-/etc/topodoctor/node-type.json}
args=(check --format line --timeout 20)
[ -r "$EXPECT" ] && args+=(--expect "$EXPECT")

# --format line prints exactly one line for every outcome, so 2>&1 is a one-line reason.
reason=$("$TOPODOCTOR" "${args[@]}" 2>&1)
rc=$?
case $rc in
  0) exit 0 ;;
  2) logger -t topodoctor "prolog misconfigured: $reason"; exit 0 ;;  # the script's or its files' fault, not the node's
  *) scontrol update nodename="$(hostname -s)" state=drain reason="${reason:0:200}" || true
     logger -t topodoctor "node drained: $reason"
     exit 1 ;;
esac
