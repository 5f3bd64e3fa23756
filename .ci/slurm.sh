#!/usr/bin/env bash
# slurm.sh start|stop: a real one-node Slurm on this machine (Debian's
# slurmctld, slurmd and munge, localhost only) for the slurm executor's
# end-to-end test (make slurm/check). Root only; it installs the packages,
# writes /etc/slurm and starts the daemons without systemd. Two fake GPUs
# of GRES type "fake" (symlinks to /dev/null: Slurm wants device files)
# stand in for a pool; the node side runs them on the CPU backend.
# docs/interop/slurm.md has how each setting was found.
set -euo pipefail

start() {
  local pkgs=(slurmctld slurmd slurm-client munge) missing=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  stop quiet
  local node cpus mem
  node=$(hostname -s)
  read -r cpus mem < <(slurmd -C | awk '/^NodeName/{for(i=1;i<=NF;i++){split($i,a,"=");
    if(a[1]=="CPUs")c=a[2]; if(a[1]=="RealMemory")m=a[2]} print c, m}')
  if [ ! -f /etc/munge/munge.key ]; then
    mungekey --create
    chown munge:munge /etc/munge/munge.key
  fi
  mkdir -p /run/munge && chown munge:munge /run/munge
  runuser -u munge -- /usr/sbin/munged
  munge -n | unmunge >/dev/null
  # A fresh state each time: no node drained by an earlier run, no old jobs.
  rm -rf /var/spool/slurmctld /var/spool/slurmd
  mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /etc/slurm
  ln -sf /dev/null /dev/fakegpu0
  ln -sf /dev/null /dev/fakegpu1
  cat >/etc/slurm/slurm.conf <<CONF
ClusterName=kbci
SlurmctldHost=$node
AuthType=auth/munge
SlurmUser=root
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmdTimeout=10
SlurmctldTimeout=10
InactiveLimit=0
KillWait=5
MinJobAge=300
ReturnToService=2
GresTypes=gpu
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Gres=gpu:fake:2 State=UNKNOWN
PartitionName=kbci Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
  echo "NodeName=$node Name=gpu Type=fake File=/dev/fakegpu[0-1]" >/etc/slurm/gres.conf
  setsid -f /usr/sbin/slurmctld -D -i >/var/log/slurm/slurmctld.out 2>&1 </dev/null
  setsid -f /usr/sbin/slurmd -D >/var/log/slurm/slurmd.out 2>&1 </dev/null
  for _ in $(seq 1 60); do
    if [ "$(sinfo -h -o %T 2>/dev/null)" = idle ]; then
      echo "slurm: $node idle (CPUs=$cpus, gpu:fake:2)"
      return 0
    fi
    sleep 1
  done
  echo "slurm: the node did not come up" >&2
  sinfo >&2 || true
  tail -n 30 /var/log/slurm/*.log >&2 || true
  return 1
}

# startd restarts slurmd alone (after a test killed it).
startd() {
  setsid -f /usr/sbin/slurmd -D >>/var/log/slurm/slurmd.out 2>&1 </dev/null
}

# startctld restarts slurmctld alone (after a test stopped it for an
# outage), on the state it saved.
startctld() {
  setsid -f /usr/sbin/slurmctld -D -i >>/var/log/slurm/slurmctld.out 2>&1 </dev/null
}

stop() {
  scancel --user=root 2>/dev/null || true
  for f in /run/slurmd.pid /run/slurmctld.pid; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
  done
  pkill -x slurmstepd 2>/dev/null || true
  pkill -x munged 2>/dev/null || true
  for _ in $(seq 1 20); do
    pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null || pgrep -x munged >/dev/null || break
    sleep 0.5
  done
  rm -f /dev/fakegpu0 /dev/fakegpu1 /run/slurmd.pid /run/slurmctld.pid
  [ "${1:-}" = quiet ] || echo "slurm: stopped"
}

case "${1:-}" in
  start | stop | startd | startctld) "$1" ;;
  *) echo "usage: $0 start|stop|startd|startctld" >&2; exit 2 ;;
esac
