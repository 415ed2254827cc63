#!/usr/bin/env bash
# A two-node SLURM on this machine (issue 32): two network namespaces, each a "node" with its own
# address, host name and slurmd, joined by a bridge; one slurmctld in this namespace; accounting
# through the slurmdbd (and munged) that setup_slurm.sh started, as a second cluster.
#
#   SLURM2_BASE=/tmp/arctl-two  SLURM2_PREFIX=arctl2n  SLURM2_NET=10.77.0  SLURM2_PORT=6917
#   SLURM2_CPUS=2 (per node)  SLURM2_DBD_PORT=6819  SLURM2_FIRST_JOB_ID=100000 (job ids of this cluster
#   start there: the machine's /tmp is shared, and a verl job's Ray dir is /tmp/arctl-ray-<job id>)
#   bash setup_two_nodes.sh   ->  export SLURM_CONF=$SLURM2_BASE/slurm.conf
#
# Node i (0, 1) is the network namespace ${PREFIX}$i at $NET.$((i+2)) with host name ${PREFIX}-node$i
# (its own UTS namespace; /etc/hosts of the node maps every node and the controller, bind-mounted in its
# own mount namespace); the bridge ${PREFIX}br holds $NET.1, where slurmctld listens. The nodes share
# this machine's file system (as a cluster's shared home), not its network: a job step on node 1
# reaches node 0 only at node 0's address. Stop with teardown_two_nodes.sh (recorded PIDs, then every
# process left in the nodes' namespaces, then the namespaces and the bridge).
set -euo pipefail
BASE=${SLURM2_BASE:-/tmp/arctl-two}
PREFIX=${SLURM2_PREFIX:-arctl2n}
NET=${SLURM2_NET:-10.77.0}
PORT=${SLURM2_PORT:-6917}
CPUS=${SLURM2_CPUS:-2}
DBD_PORT=${SLURM2_DBD_PORT:-6819}
FIRST_JOB_ID=${SLURM2_FIRST_JOB_ID:-100000}
CTL="$NET.1"
T0=$(date +%s%N)
log() { printf '[setup_two_nodes %5dms] %s\n' $(( ($(date +%s%N) - T0) / 1000000 )) "$*"; }
die() { echo "setup_two_nodes: ERROR: $*" >&2; tail -n 20 "$BASE"/log/*.log 2>/dev/null >&2; exit 1; }
wait_for() {  # wait_for <what> <seconds> <cmd...>
  local what=$1 end=$(( $(date +%s) + $2 )); shift 2
  until "$@" >/dev/null 2>&1; do [ "$(date +%s)" -lt "$end" ] || die "timeout waiting for $what"; sleep 0.2; done
}
[ ${#PREFIX} -le 10 ] || die "SLURM2_PREFIX must be at most 10 characters (interface names: 15)"
for prog in ip nsenter unshare slurmctld slurmd sacctmgr; do command -v "$prog" >/dev/null || die "$prog is not installed"; done
(munge -n | unmunge) >/dev/null 2>&1 || die "munged is not running (setup_slurm.sh starts it)"
timeout 2 bash -c "</dev/tcp/127.0.0.1/$DBD_PORT" 2>/dev/null || die "no slurmdbd on port $DBD_PORT (setup_slurm.sh starts it)"
[ -e "$BASE/pids/slurmctld.pid" ] && die "$BASE already in use; run teardown_two_nodes.sh first"
ip link show "${PREFIX}br" >/dev/null 2>&1 && die "bridge ${PREFIX}br exists; run teardown_two_nodes.sh first"
# a subnet already on an interface (a killed run's bridge) takes the route to $NET.1: the nodes' slurmd
# then fail to register ("connect failure") and the wait below times out with no word of why
used=$(ip -o -4 addr show | awk -v net="$NET." 'index($4, net) == 1 {print $2}' | sort -u | tr '\n' ' ')
[ -z "$used" ] || die "subnet $NET.0/24 is already on ${used}(a killed run's bridge? remove it with ip link del and its namespaces with ip netns del), or choose another SLURM2_NET"

rm -rf "$BASE"; mkdir -p "$BASE"/{pids,log,ctld,spool/node0,spool/node1}
echo "$PREFIX" > "$BASE/prefix"   # teardown_two_nodes.sh reads the names from here

# 1. the network: a bridge here, a veth pair into each node's namespace
ip link add "${PREFIX}br" type bridge
ip addr add "$CTL/24" dev "${PREFIX}br"
ip link set "${PREFIX}br" up
HOSTS="127.0.0.1 localhost
$CTL $(hostname -s)"
for i in 0 1; do HOSTS="$HOSTS
$NET.$((i + 2)) ${PREFIX}-node$i"; done
for i in 0 1; do
  ns="${PREFIX}$i"
  ip netns add "$ns"
  ip link add "${PREFIX}v$i" type veth peer name eth0 netns "$ns"
  ip link set "${PREFIX}v$i" master "${PREFIX}br"
  ip link set "${PREFIX}v$i" up
  ip netns exec "$ns" ip addr add "$NET.$((i + 2))/24" dev eth0
  ip netns exec "$ns" ip link set eth0 up
  ip netns exec "$ns" ip link set lo up
done
printf '%s\n' "$HOSTS" > "$BASE/hosts"
log "network up: bridge ${PREFIX}br ($CTL), nodes ${PREFIX}0 ($NET.2), ${PREFIX}1 ($NET.3)"

# 2. the config: a cluster of its own (ClusterName two-$PREFIX) in the running slurmdbd
MEM=4000
cat > "$BASE/slurm.conf" <<EOF
ClusterName=two-${PREFIX}
FirstJobId=$FIRST_JOB_ID
SlurmctldHost=$(hostname -s)($CTL)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
AuthType=auth/munge
AuthInfo=cred_expire=10
StateSaveLocation=$BASE/ctld
SlurmdSpoolDir=$BASE/spool/%n
SlurmctldPidFile=$BASE/pids/slurmctld.pid
SlurmdPidFile=$BASE/pids/slurmd-%n.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$CTL
AccountingStoragePort=$DBD_PORT
JobAcctGatherType=jobacct_gather/linux
JobCompType=jobcomp/filetxt
JobCompLoc=$BASE/log/jobcomp.txt
KillWait=20
MailProg=/bin/true
SchedulerParameters=batch_sched_delay=0,sched_interval=5,bf_interval=5
MinJobAge=300
SlurmdParameters=config_overrides
NodeName=node0 NodeHostname=${PREFIX}-node0 NodeAddr=$NET.2 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
NodeName=node1 NodeHostname=${PREFIX}-node1 NodeAddr=$NET.3 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=two Nodes=node0,node1 Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$BASE/slurm.conf"
sacctmgr -i add cluster "two-${PREFIX}" >/dev/null 2>&1 || true
log "config written ($BASE/slurm.conf)"

# 3. slurmctld here, one slurmd in each node (its namespace; /etc/hosts and host name its own)
slurmctld -f "$SLURM_CONF"
wait_for slurmctld 30 scontrol ping
for i in 0 1; do
  nsenter --net="/run/netns/${PREFIX}$i" unshare --mount --uts --propagation private \
    sh -c "mount --bind '$BASE/hosts' /etc/hosts && hostname '${PREFIX}-node$i' && exec slurmd -f '$SLURM_CONF' -N node$i"
done
wait_for "both nodes idle" 60 sh -c "[ \"\$(sinfo -h -p two -o %t | sort -u)\" = idle ]"
log "slurmctld (pid $(cat "$BASE/pids/slurmctld.pid")), slurmd node0 (pid $(cat "$BASE/pids/slurmd-node0.pid")), node1 (pid $(cat "$BASE/pids/slurmd-node1.pid")) up"

# 4. smoke: one step on each node, each seeing its own address
out=$(srun -N2 -n2 -t 1 sh -c 'echo "$SLURM_NODEID $(hostname) $(hostname --ip-address)"' | sort) || die "srun smoke test failed"
[ "$out" = "0 ${PREFIX}-node0 $NET.2
1 ${PREFIX}-node1 $NET.3" ] || die "srun smoke test: unexpected hosts: $out"
log "cluster ready: $(sinfo -h -o '%P %a %D %t %C') | a step on each node, each at its own address"
