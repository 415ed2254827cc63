#!/usr/bin/env bash
# Stop what setup_two_nodes.sh started: cancel the cluster's jobs, stop the recorded slurmctld and
# slurmd PIDs, kill every process still inside a node's network namespace (what the run left there),
# then delete the namespaces and the bridge. Prints what it had to kill (the tests assert nothing is).
BASE=${SLURM2_BASE:-/tmp/arctl-two}
[ -f "$BASE/prefix" ] || exit 0
PREFIX=$(cat "$BASE/prefix")
P=$BASE/pids
export SLURM_CONF="$BASE/slurm.conf"
alive() { [ -f "$P/$1.pid" ] && kill -0 "$(cat "$P/$1.pid")" 2>/dev/null; }
if alive slurmctld; then
  ids=$(squeue -h -o %A 2>/dev/null); [ -n "$ids" ] && scancel $ids
  for _ in $(seq 100); do [ -z "$(squeue -h -o %A 2>/dev/null)" ] && break; sleep 0.2; done
fi
stop() {  # stop <pidfile name> <comm>: SIGTERM, wait up to 10 s, SIGKILL
  local pid
  [ -f "$P/$1.pid" ] || return 0
  pid=$(cat "$P/$1.pid"); rm -f "$P/$1.pid"
  kill -0 "$pid" 2>/dev/null && [ "$(cat /proc/$pid/comm 2>/dev/null)" = "$2" ] || return 0
  kill -TERM "$pid"
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && { kill -KILL "$pid"; echo "teardown_two_nodes: $1 ($pid) SIGKILLed"; }
  return 0
}
stop slurmd-node0 slurmd; stop slurmd-node1 slurmd; stop slurmctld slurmctld
for i in 0 1; do
  ns="${PREFIX}$i"
  ip netns list 2>/dev/null | grep -qw "$ns" || continue
  left=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
  if [ -n "$left" ]; then
    echo "teardown_two_nodes: killing what was left in node $i: $(for p in $left; do printf '%s(%s) ' "$p" "$(cat /proc/$p/comm 2>/dev/null)"; done)"
    kill -KILL $left 2>/dev/null
    sleep 0.5
  fi
  ip netns del "$ns"
done
ip link del "${PREFIX}br" 2>/dev/null || true
rm -f "$BASE/prefix"
