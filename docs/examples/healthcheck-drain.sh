#!/usr/bin/env bash
# Slurm HealthCheckProgram=: runs every HealthCheckInterval on idle and busy nodes. Drains
# with topodoctor's reason; resumes only nodes that topodoctor itself drained.
node=$(hostname -s)
reason=$(topodoctor check --format line --timeout 30 --expect /etc/topodoctor/node-type.json 2>&1)
rc=$?
current=$(scontrol show node "$node" | sed -n 's/.*Reason=\(.*\) \[.*/\1/p')
if [ $rc -eq 0 ]; then
  if [[ "$current" == topodoctor* ]]; then
    scontrol update nodename="$node" state=resume
  fi
elif [ $rc -ne 2 ]; then
  scontrol update nodename="$node" state=drain reason="${reason:0:200}"
fi
exit 0
